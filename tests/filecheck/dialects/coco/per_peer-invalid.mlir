// RUN: coconet-opt --split-input-file --verify-diagnostics %s | filecheck %s
// coco.shift and coco.per_peer's rules (docs/dialect.md): each rejected with
// a diagnostic that names the op and states the rule.

// CHECK: 'coco.shift' op result type must be !coco.tensor<16xf32, sliced<0>> by the layout rules, got !coco.tensor<16xf32, replicated>
func.func @shift_keeps_the_type(%x: !coco.tensor<16xf32, sliced<0>>) {
  %s = coco.shift %x by = 1 : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.per_peer' op 2 inputs need 2 chunk dims, got 1
func.func @dims_count(%x: !coco.tensor<16x32xf32, sliced<0>>, %w: !coco.tensor<32x64xf32, sliced<1>>) {
  %y = coco.per_peer (%x, %w) dims = [0] -> [0] : (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x64xf32, sliced<1>> {
  ^bb0(%a: !coco.tensor<16x32xf32, replicated>, %b: !coco.tensor<32x64xf32, sliced<1>>):
    %m = coco.matmul %a, %b : (!coco.tensor<16x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x64xf32, sliced<1>>
    coco.yield %m : !coco.tensor<16x64xf32, sliced<1>>
  }
  func.return
}

// -----

// A gathered input is seen replicated in the body.
// CHECK: 'coco.per_peer' op block argument types must be (!coco.tensor<16x32xf32, replicated>), got (!coco.tensor<16x32xf32, sliced<0>>)
func.func @gathered_is_replicated(%x: !coco.tensor<16x32xf32, sliced<0>>) {
  %y = coco.per_peer (%x) dims = [0] -> [0] : (!coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, replicated> {
  ^bb0(%a: !coco.tensor<16x32xf32, sliced<0>>):
    coco.yield %a : !coco.tensor<16x32xf32, sliced<0>>
  }
  func.return
}

// -----

// CHECK: 'coco.per_peer' op the body cannot hold 'coco.all_reduce': each rank runs its own chunk at a step, so the body cannot communicate
func.func @no_communication(%x: !coco.tensor<16x32xf32, sliced<1>>, %w: !coco.tensor<32x64xf32, sliced<0>>) {
  %y = coco.per_peer (%x, %w) dims = [0, -1] -> [0] : (!coco.tensor<16x32xf32, sliced<1>>, !coco.tensor<32x64xf32, sliced<0>>) -> !coco.tensor<16x64xf32, replicated> {
  ^bb0(%a: !coco.tensor<16x32xf32, sliced<1>>, %b: !coco.tensor<32x64xf32, sliced<0>>):
    %m = coco.matmul %a, %b : (!coco.tensor<16x32xf32, sliced<1>>, !coco.tensor<32x64xf32, sliced<0>>) -> !coco.tensor<16x64xf32, local>
    %r = coco.all_reduce %m reduction = sum : !coco.tensor<16x64xf32, local> -> !coco.tensor<16x64xf32, replicated>
    coco.yield %r : !coco.tensor<16x64xf32, replicated>
  }
  func.return
}

// -----

// A reduce-scattered output is yielded as the partial sums.
// CHECK: 'coco.per_peer' op coco.yield types must be (!coco.tensor<16x32xf32, local>), got (!coco.tensor<16x32xf32, sliced<1>>)
func.func @scattered_yields_local(%x: !coco.tensor<16x32xf32, sliced<1>>) {
  %y = coco.per_peer (%x) dims = [0] -> [0] : (!coco.tensor<16x32xf32, sliced<1>>) -> !coco.tensor<16x32xf32, sliced<0>> {
  ^bb0(%a: !coco.tensor<16x32xf32, sliced<1>>):
    coco.yield %a : !coco.tensor<16x32xf32, sliced<1>>
  }
  func.return
}

// -----

// CHECK: 'coco.per_peer' op at least one input must be chunked
func.func @nothing_chunked(%x: !coco.tensor<16x32xf32, replicated>) {
  %y = coco.per_peer (%x) dims = [-1] -> [0] : (!coco.tensor<16x32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated> {
  ^bb0(%a: !coco.tensor<16x32xf32, replicated>):
    coco.yield %a : !coco.tensor<16x32xf32, replicated>
  }
  func.return
}

// -----

// CHECK: 'coco.per_peer' op output chunk dim 2 is out of range for an operand of rank 2
func.func @output_dim(%x: !coco.tensor<16x32xf32, sliced<0>>) {
  %y = coco.per_peer (%x) dims = [0] -> [2] : (!coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, replicated> {
  ^bb0(%a: !coco.tensor<16x32xf32, replicated>):
    coco.yield %a : !coco.tensor<16x32xf32, replicated>
  }
  func.return
}
