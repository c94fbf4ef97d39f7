// coco.fusion runs its body once; coco.overlap runs it chunk by chunk and
// concatenates the chunks. This file is a fused, overlapped row-parallel layer
// (with a dropout inside the chunks, which keeps its global mask); the plain
// program it must equal is in the //P lines below.

// RUN: sed -n 's|^//P ||p' %s > %t.plain.mlir
// RUN: coconet-run --compare %t.plain.mlir %s --world 2 | filecheck %s --check-prefix=W2
// RUN: coconet-run --compare %t.plain.mlir %s --world 4 | filecheck %s --check-prefix=W4
// RUN: coconet-run --compare %t.plain.mlir %s --world 8 | filecheck %s --check-prefix=W8
// RUN: sed -e 's/seed = 7/seed = 8/' %s > %t.wrong.mlir
// RUN: not coconet-run --compare %t.plain.mlir %t.wrong.mlir --world 4 | filecheck %s --check-prefix=WRONG

// W2: equivalent: 1 output agrees on 2 ranks (seed 0)
// W4: equivalent: 1 output agrees on 4 ranks (seed 0)
// W8: equivalent: 1 output agrees on 8 ranks (seed 0)
// WRONG: not equivalent: layer.result0 differs on 4 ranks

//P func.func @layer(%x: !coco.tensor<4x8x64xf32, sliced<2>>, %w: !coco.tensor<64x64xf32, sliced<0>>, %bias: !coco.tensor<64xf32, replicated>, %r: !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
//P   %m = coco.matmul %x, %w : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, local>
//P   %s = coco.all_reduce %m reduction = sum : !coco.tensor<4x8x64xf32, local> -> !coco.tensor<4x8x64xf32, replicated>
//P   %b = coco.add %s, %bias : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
//P   %d = coco.dropout %b p = 1.000000e-01 seed = 7 : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
//P   %o = coco.add %d, %r : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
//P   func.return %o : !coco.tensor<4x8x64xf32, replicated>
//P }

func.func @layer(%x: !coco.tensor<4x8x64xf32, sliced<2>>, %w: !coco.tensor<64x64xf32, sliced<0>>, %bias: !coco.tensor<64xf32, replicated>, %r: !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
  %o = coco.overlap chunks = 2 (%x, %w, %bias, %r) dims = [0, -1, -1, 0] -> [0] : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>, !coco.tensor<64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
  ^bb0(%xc: !coco.tensor<2x8x64xf32, sliced<2>>, %wc: !coco.tensor<64x64xf32, sliced<0>>, %bc: !coco.tensor<64xf32, replicated>, %rc: !coco.tensor<2x8x64xf32, replicated>):
    %m = coco.matmul %xc, %wc : (!coco.tensor<2x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<2x8x64xf32, local>
    %f = coco.fusion (%m, %bc, %rc) : (!coco.tensor<2x8x64xf32, local>, !coco.tensor<64xf32, replicated>, !coco.tensor<2x8x64xf32, replicated>) -> !coco.tensor<2x8x64xf32, replicated> {
    ^bb0(%mm: !coco.tensor<2x8x64xf32, local>, %bb: !coco.tensor<64xf32, replicated>, %rr: !coco.tensor<2x8x64xf32, replicated>):
      %s = coco.reduce_scatter %mm reduction = sum dim = 1 : !coco.tensor<2x8x64xf32, local> -> !coco.tensor<2x8x64xf32, sliced<1>>
      %b = coco.add %s, %bb : (!coco.tensor<2x8x64xf32, sliced<1>>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<2x8x64xf32, sliced<1>>
      %d = coco.dropout %b p = 1.000000e-01 seed = 7 : (!coco.tensor<2x8x64xf32, sliced<1>>) -> !coco.tensor<2x8x64xf32, sliced<1>>
      %rs = coco.all_slice %rr dim = 1 : (!coco.tensor<2x8x64xf32, replicated>) -> !coco.tensor<2x8x64xf32, sliced<1>>
      %a = coco.add %d, %rs : (!coco.tensor<2x8x64xf32, sliced<1>>, !coco.tensor<2x8x64xf32, sliced<1>>) -> !coco.tensor<2x8x64xf32, sliced<1>>
      %g = coco.all_gather %a : !coco.tensor<2x8x64xf32, sliced<1>> -> !coco.tensor<2x8x64xf32, replicated>
      coco.yield %g : !coco.tensor<2x8x64xf32, replicated>
    }
    coco.yield %f : !coco.tensor<2x8x64xf32, replicated>
  }
  func.return %o : !coco.tensor<4x8x64xf32, replicated>
}
