// Pass options are checked against the pass's dataclass fields; a bad one is
// reported in words (the option, the pass, what it expects), with exit 1.

// RUN: not coconet-opt %s -p 'coco-overlap{chunks=abc}' 2>&1 | filecheck %s --check-prefix=KIND
// RUN: not coconet-opt %s -p 'coco-fuse{foo=1}' 2>&1 | filecheck %s --check-prefix=NAME
// RUN: not coconet-opt %s -p 'coco-overlap{chunk=2}' 2>&1 | filecheck %s --check-prefix=CLOSE
// RUN: not coconet-opt %s -p 'coco-optimize{split=yes}' 2>&1 | filecheck %s --check-prefix=BOOL
// RUN: not coconet-opt %s -p 'cse{foo}' 2>&1 | filecheck %s --check-prefix=NONE
// RUN: not coconet-run %s --world 2 -p 'coco-overlap{chunks=abc}' 2>&1 | filecheck %s --check-prefix=RUNNER
// RUN: coconet-opt %s -p 'coco-overlap{chunks=2 dim}' | filecheck %s --check-prefix=GOOD

// KIND:      {{^}}coconet-opt: error: pass 'coco-overlap': option 'chunks' expects an integer, got 'abc'{{$}}
// NAME:      {{^}}coconet-opt: error: pass 'coco-fuse' has no option 'foo' (its options: op, reductions, collectives, ops){{$}}
// CLOSE:     {{^}}coconet-opt: error: pass 'coco-overlap' has no option 'chunk' (did you mean 'chunks'? its options: op, chunks, dim, per_peer, auto, world, machine){{$}}
// BOOL:      {{^}}coconet-opt: error: pass 'coco-optimize': option 'split' expects a boolean (true or false), got 'yes'{{$}}
// NONE:      {{^}}coconet-opt: error: pass 'cse' has no option 'foo' (it takes none){{$}}
// RUNNER:    {{^}}coconet-run: error: pass 'coco-overlap': option 'chunks' expects an integer, got 'abc'{{$}}
// GOOD:      coco.overlap chunks = 2

func.func @layer(%x: !coco.tensor<8x16xf32, sliced<1>>, %w: !coco.tensor<16x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, replicated> {
  %p = coco.matmul %x, %w : (!coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<16x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, local>
  %s = coco.all_reduce %p reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  func.return %s : !coco.tensor<8x16xf32, replicated>
}
