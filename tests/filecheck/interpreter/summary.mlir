// coconet-run's summary: one line per output (results, then updated
// parameters), `KEY SHAPExELT LAYOUT sum= min= max= hash=`. The outputs here
// do not depend on the random inputs, so every number is pinned; the local
// output is stacked over the ranks, so its hash depends on the world size.

// RUN: coconet-run %s --world 4 | filecheck %s
// RUN: coconet-run %s --world 2 --seed 7 | filecheck %s --check-prefix=TWO
// RUN: coconet-run %s --world 4 --save %t.npz | filecheck %s --check-prefix=SAVE
// RUN: python -c "import numpy as np; d = np.load('%t.npz'); print(*[f'{k} {d[k].shape}' for k in d.files], sep='\n')" | filecheck %s --check-prefix=NPZ

// CHECK:      summary.mlir: 4 outputs on 4 ranks (seed 0, backend numpy)
// CHECK-NEXT: fixed.result0 f32 replicated sum=2 min=2 max=2 hash=d88c86f15bbea365
// CHECK-NEXT: fixed.result1 16x4xf32 local sum=0 min=0 max=0 hash=5f70bf18a0860070
// CHECK-NEXT: fixed.result2 16x4xf32 sliced<0> sum={{-?[0-9.e+-]+}} min={{[^ ]+}} max={{[^ ]+}} hash={{[0-9a-f]{16}$}}
// CHECK-NEXT: fixed.arg1 16x4xf32 replicated sum=0 min=0 max=0 hash=5341e6b2646979a7
// CHECK-NOT:  {{.}}

// TWO:      summary.mlir: 4 outputs on 2 ranks (seed 7, backend numpy)
// TWO-NEXT: fixed.result0 f32 replicated sum=2 min=2 max=2 hash=d88c86f15bbea365
// TWO-NEXT: fixed.result1 16x4xf32 local sum=0 min=0 max=0 hash=076a27c79e5ace2a

// SAVE:      fixed.arg1 16x4xf32 replicated
// SAVE-NEXT: saved 6 arrays to {{.*}}.npz

// NPZ:      fixed.result0 ()
// NPZ-NEXT: fixed.result1 (4, 16, 4)
// NPZ-NEXT: fixed.result2 (16, 4)
// NPZ-NEXT: fixed.arg1 (16, 4)
// NPZ-NEXT: input:fixed.arg0 (4, 16, 4)
// NPZ-NEXT: input:fixed.arg1 (16, 4)

func.func @fixed(%g: !coco.tensor<16x4xf32, local>, %w: !coco.tensor<16x4xf32, replicated>) -> (!coco.tensor<f32, replicated>, !coco.tensor<16x4xf32, local>, !coco.tensor<16x4xf32, sliced<0>>) {
  %two = coco.constant 2.0 : !coco.tensor<f32, replicated>
  %zero = coco.sub %g, %g : (!coco.tensor<16x4xf32, local>, !coco.tensor<16x4xf32, local>) -> !coco.tensor<16x4xf32, local>
  %rs = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<16x4xf32, local> -> !coco.tensor<16x4xf32, sliced<0>>
  %w0 = coco.sub %w, %w : (!coco.tensor<16x4xf32, replicated>, !coco.tensor<16x4xf32, replicated>) -> !coco.tensor<16x4xf32, replicated>
  coco.update %w, %w0 : !coco.tensor<16x4xf32, replicated>
  func.return %two, %zero, %rs : !coco.tensor<f32, replicated>, !coco.tensor<16x4xf32, local>, !coco.tensor<16x4xf32, sliced<0>>
}
