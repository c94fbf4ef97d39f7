// coco-autotune: the candidate schedule the cost model predicts fastest.
//
// At FLUX's all-gather + GEMM sizes (examples/sequence_parallel.py --model),
// the gather is hidden behind the matmul one peer at a time.
// RUN: coconet-opt %s -p 'coco-autotune' | filecheck %s
// RUN: coconet-opt %s -p 'coco-autotune{machine=h200x8}' | filecheck %s
//
// The report: every candidate, fastest first; the refused ones after.
// RUN: coconet-opt %S/../../../examples/megatron.mlir -p 'coco-autotune{report=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=REPORT
//
// The oracle: the chosen schedule computes the same values on 2, 4 and 8 ranks.
// RUN: coconet-opt %S/../../../examples/pipeline.mlir -p coco-autotune -o %t
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t --world 2
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t --world 4
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t --world 8
//
// Refusals: a machine that is no preset, more ranks than the machine has.
// RUN: not coconet-opt %s -p 'coco-autotune{machine=tpu}' 2>&1 | filecheck %s --check-prefix=MACHINE
// RUN: not coconet-opt %s -p 'coco-autotune{world=16}' 2>&1 | filecheck %s --check-prefix=WORLD

func.func @sequence_parallel(%x: !coco.tensor<4096x1x12288xbf16, sliced<0>>, %w: !coco.tensor<12288x49152xbf16, sliced<1>>) -> !coco.tensor<4096x1x49152xbf16, sliced<2>> {
  %gather = coco.all_gather %x {name = "gather"} : !coco.tensor<4096x1x12288xbf16, sliced<0>> -> !coco.tensor<4096x1x12288xbf16, replicated>
  %matmul = coco.matmul %gather, %w {name = "matmul"} : (!coco.tensor<4096x1x12288xbf16, replicated>, !coco.tensor<12288x49152xbf16, sliced<1>>) -> !coco.tensor<4096x1x49152xbf16, sliced<2>>
  func.return %matmul : !coco.tensor<4096x1x49152xbf16, sliced<2>>
}

// CHECK-LABEL: func.func @sequence_parallel(
// CHECK-NEXT:    %matmul = coco.per_peer (%x, %w) dims = [0, -1] -> [0] {name = "matmul_per_peer"}
// CHECK-NEXT:    ^bb0(%x_1: !coco.tensor<4096x1x12288xbf16, replicated>, %w_1: !coco.tensor<12288x49152xbf16, sliced<1>>):
// CHECK-NEXT:      %matmul_1 = coco.matmul %x_1, %w_1
// CHECK-NEXT:      coco.yield %matmul_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %matmul

// REPORT:      coco-autotune on h100x8, 8 ranks: {{[0-9]+}} candidates, {{[1-9][0-9]*}} refused
// REPORT-NEXT: best: #{{[0-9]+}} {{.+}}, {{[0-9.,]+}} us predicted; coco-optimize {{[0-9.,]+}} us; speedup {{[0-9.]+}}x
// REPORT-NEXT: pipeline: {{.+}}
// REPORT-EMPTY:
// REPORT-NEXT: {{ *}}#  time (us)  speedup  launches  bytes sent  candidate {{ +}}pipeline
// REPORT-DAG:  {{^ *}}1 {{ +[0-9.,]+ +}}1.000x {{ +[0-9]+ +[0-9,]+ +}}coco-optimize {{ +}}coco-optimize{{$}}
// REPORT-DAG:  {{^ *[0-9]+ +[0-9.,]+ +[0-9.]+x +[0-9]+ +[0-9,]+ +}}as written {{ +}}(none)
// REPORT:      refused (not predicted):
// REPORT-NEXT:   #{{[0-9]+}} passes, split dim=0: {{.*}}megatron.mlir:{{[0-9]+}}:{{[0-9]+}}: warning: 'coco.all_reduce' op coco-split-all-reduce transforms no op with dim=0 world=8: dimension 0 (size 4) is not divisible by the world size 8
// REPORT-NEXT:       coco-fuse-collective{where_it_pays=true},coco-split-all-reduce{dim=0 world=8},coco-reorder,

// MACHINE: error: coco-autotune: unknown machine 'tpu'; the presets are a100x8, h100x1024-ib, h100x16-ib, h100x256-ib, h100x8, h200x8, h800x8
// WORLD: error: coco-autotune: world must be between 1 and the 8 GPUs of machine 'h100x8', got 16
