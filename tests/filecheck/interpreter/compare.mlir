// coconet-run --compare: exit 0 when every output agrees, 1 (with the first
// differing output) when one does not. The rewritten programs come from this
// file: coco-split-all-reduce's output (an equivalent program) and a sed edit
// that turns the add into a sub (a wrong one).

// RUN: coconet-run --compare %s %s --world 2 | filecheck %s --check-prefix=SELF
// RUN: coconet-opt %s -p coco-split-all-reduce | coconet-run --compare %s - --world 4 | filecheck %s --check-prefix=SPLIT
// RUN: coconet-opt %s -p coco-split-all-reduce | coconet-run --compare %s - --world 8 --seed 3 | filecheck %s --check-prefix=SPLIT8
// RUN: sed -e 's/coco.add/coco.sub/' %s > %t.wrong.mlir
// RUN: not coconet-run --compare %s %t.wrong.mlir --world 4 | filecheck %s --check-prefix=WRONG
// RUN: coconet-run --compare %s %t.wrong.mlir --world 4 --atol 1e9 | filecheck %s --check-prefix=LOOSE
// RUN: not coconet-run --compare %s %t.missing.mlir --world 4 2>&1 | filecheck %s --check-prefix=MISSING

// SELF:   equivalent: 1 output agrees on 2 ranks (seed 0)
// SPLIT:  equivalent: 1 output agrees on 4 ranks (seed 0)
// SPLIT8: equivalent: 1 output agrees on 8 ranks (seed 3)
// WRONG:  not equivalent: layer.result0 differs on 4 ranks (seed 0): max abs error {{[0-9.]+e[+-][0-9]+}}, max rel error {{[0-9.]+e[+-][0-9]+$}}
// WRONG-NEXT: layer.result0:
// LOOSE:  equivalent: 1 output agrees on 4 ranks (seed 0)
// MISSING: {{.*}}missing.mlir: error: cannot read: No such file or directory

func.func @layer(%p: !coco.tensor<16x8xf32, local>, %bias: !coco.tensor<8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated> {
  %s = coco.all_reduce %p reduction = sum : !coco.tensor<16x8xf32, local> -> !coco.tensor<16x8xf32, replicated>
  %r = coco.add %s, %bias : (!coco.tensor<16x8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated>
  func.return %r : !coco.tensor<16x8xf32, replicated>
}
