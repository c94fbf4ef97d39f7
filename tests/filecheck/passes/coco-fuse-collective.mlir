// RUN: coconet-opt %s -p coco-fuse-collective | filecheck %s
// RUN: coconet-opt %s -p 'coco-fuse-collective{where_it_pays=true}' | filecheck %s --check-prefix=PAYS
// RUN: not coconet-opt %s -p 'coco-fuse-collective{op=shared}' 2>&1 | filecheck %s --check-prefix=USES
// RUN: not coconet-opt %s -p 'coco-fuse-collective{op=act}' 2>&1 | filecheck %s --check-prefix=USER
// RUN: not coconet-opt %s -p 'coco-fuse-collective{op=big where_it_pays=true}' 2>&1 | filecheck %s --check-prefix=BIG
// RUN: not coconet-opt %s -p 'coco-fuse-collective{op=sum}' 2>&1 | filecheck %s --check-prefix=KIND
// The oracle: every function computes the same values on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-fuse-collective -o %t
// RUN: coconet-run --compare %s %t --world 2 --entry dlrm && coconet-run --compare %s %t --world 4 --entry dlrm && coconet-run --compare %s %t --world 8 --entry dlrm
// RUN: coconet-run --compare %s %t --world 2 --entry gemv && coconet-run --compare %s %t --world 4 --entry gemv && coconet-run --compare %s %t --world 8 --entry gemv
// RUN: coconet-run --compare %s %t --world 2 --entry moe && coconet-run --compare %s %t --world 4 --entry moe && coconet-run --compare %s %t --world 8 --entry moe
// RUN: coconet-run --compare %s %t --world 2 --entry big && coconet-run --compare %s %t --world 4 --entry big && coconet-run --compare %s %t --world 8 --entry big

// Embedding + all_to_all (DLRM): one region, named after the producer.
// CHECK-LABEL: func.func @dlrm(
// CHECK-NEXT:    %a = coco.fusion (%t, %i) {name = "emb_fused"} : (!coco.tensor<8x16x8xf32, sliced<0>>, !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x8xf32, sliced<1>> {
// CHECK-NEXT:    ^bb0(%t_1: !coco.tensor<8x16x8xf32, sliced<0>>, %i_1: !coco.tensor<8x8x3xi32, sliced<0>>):
// CHECK-NEXT:      %e = coco.embedding %t_1, %i_1 pooling = sum {name = "emb"}
// CHECK-NEXT:      %a_1 = coco.all_to_all %e dim = 1
// CHECK-NEXT:      coco.yield %a_1 : !coco.tensor<8x8x8xf32, sliced<1>>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %a
// PAYS-LABEL:  func.func @dlrm(
// PAYS-NEXT:     coco.fusion

// GEMV + all_reduce: the bias stays outside.
// CHECK-LABEL: func.func @gemv(
// CHECK-NEXT:    %s = coco.fusion (%x, %w) {name = "proj_fused"}
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %y = coco.matmul
// CHECK-NEXT:      %s_1 = coco.all_reduce %y reduction = sum
// CHECK-NEXT:      coco.yield %s_1
// CHECK-NEXT:    }
// CHECK-NEXT:    %o = coco.add %s, %b
// PAYS-LABEL:  func.func @gemv(
// PAYS-NEXT:     coco.fusion

// GEMM + all_to_all (experts' tokens back).
// CHECK-LABEL: func.func @moe(
// CHECK-NEXT:    %o = coco.fusion (%tokens, %w) {name = "experts_fused"}
// PAYS-LABEL:  func.func @moe(
// PAYS-NEXT:     coco.fusion

// A GEMM of 64 rows with its reduce_scatter: fused when asked, left to
// coco-overlap where it pays.
// CHECK-LABEL: func.func @big(
// CHECK-NEXT:    coco.fusion
// PAYS-LABEL:  func.func @big(
// PAYS-NEXT:     %y = coco.matmul

// Refusals name the op and the rule; the module is left as it was.
// USES:  error: 'coco.matmul' op coco-fuse-collective cannot apply: its result has 2 uses; only a producer whose one user is a collective fuses with it
// USES-NOT: coco.
// USER:  error: 'coco.matmul' op coco-fuse-collective cannot apply: its user 'coco.relu' is not a coco.all_to_all, coco.all_reduce or coco.reduce_scatter
// BIG:   error: 'coco.matmul' op coco-fuse-collective cannot apply: a matmul of 64 rows is no GEMV (at most 16): coco-overlap overlaps it with its collective
// KIND:  error: 'coco.all_reduce' op coco-fuse-collective cannot apply: it is not a coco.embedding, coco.matmul or coco.batch_matmul

func.func @dlrm(%t: !coco.tensor<8x16x8xf32, sliced<0>>, %i: !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x8xf32, sliced<1>> {
  %e = coco.embedding %t, %i pooling = sum {name = "emb"} : (!coco.tensor<8x16x8xf32, sliced<0>>, !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x8xf32, sliced<0>>
  %a = coco.all_to_all %e dim = 1 : !coco.tensor<8x8x8xf32, sliced<0>> -> !coco.tensor<8x8x8xf32, sliced<1>>
  func.return %a : !coco.tensor<8x8x8xf32, sliced<1>>
}

func.func @gemv(%x: !coco.tensor<1x64xf32, sliced<1>>, %w: !coco.tensor<64x32xf32, sliced<0>>, %b: !coco.tensor<32xf32, replicated>) -> !coco.tensor<1x32xf32, replicated> {
  %y = coco.matmul %x, %w {name = "proj"} : (!coco.tensor<1x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<1x32xf32, local>
  %s = coco.all_reduce %y reduction = sum {name = "sum"} : !coco.tensor<1x32xf32, local> -> !coco.tensor<1x32xf32, replicated>
  %o = coco.add %s, %b : (!coco.tensor<1x32xf32, replicated>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<1x32xf32, replicated>
  func.return %o : !coco.tensor<1x32xf32, replicated>
}

func.func @moe(%tokens: !coco.tensor<8x16x32xf32, sliced<0>>, %w: !coco.tensor<32x32xf32, replicated>) -> !coco.tensor<8x16x32xf32, sliced<1>> {
  %h = coco.matmul %tokens, %w {name = "experts"} : (!coco.tensor<8x16x32xf32, sliced<0>>, !coco.tensor<32x32xf32, replicated>) -> !coco.tensor<8x16x32xf32, sliced<0>>
  %o = coco.all_to_all %h dim = 1 : !coco.tensor<8x16x32xf32, sliced<0>> -> !coco.tensor<8x16x32xf32, sliced<1>>
  func.return %o : !coco.tensor<8x16x32xf32, sliced<1>>
}

func.func @big(%x: !coco.tensor<64x64xf32, sliced<1>>, %w: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<64x32xf32, sliced<0>> {
  %y = coco.matmul %x, %w {name = "big"} : (!coco.tensor<64x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<64x32xf32, local>
  %s = coco.reduce_scatter %y reduction = sum dim = 0 : !coco.tensor<64x32xf32, local> -> !coco.tensor<64x32xf32, sliced<0>>
  func.return %s : !coco.tensor<64x32xf32, sliced<0>>
}

func.func @refused(%x: !coco.tensor<4x64xf32, sliced<1>>, %w: !coco.tensor<64x32xf32, sliced<0>>) -> (!coco.tensor<4x32xf32, replicated>, !coco.tensor<4x32xf32, local>, !coco.tensor<4x32xf32, local>) {
  %y = coco.matmul %x, %w {name = "shared"} : (!coco.tensor<4x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<4x32xf32, local>
  %s = coco.all_reduce %y reduction = sum : !coco.tensor<4x32xf32, local> -> !coco.tensor<4x32xf32, replicated>
  %z = coco.matmul %x, %w {name = "act"} : (!coco.tensor<4x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<4x32xf32, local>
  %r = coco.relu %z : (!coco.tensor<4x32xf32, local>) -> !coco.tensor<4x32xf32, local>
  func.return %s, %y, %r : !coco.tensor<4x32xf32, replicated>, !coco.tensor<4x32xf32, local>, !coco.tensor<4x32xf32, local>
}
