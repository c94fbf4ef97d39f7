// RUN: coconet-opt --split-input-file --verify-diagnostics %s | filecheck %s
// One case per rule of docs/dialect.md: each is rejected with a diagnostic that
// names the op and states the rule.

// CHECK: !coco.tensor element type must be one of f16, bf16, f32, f64, i32, i1, got i8
func.func @bad_element(%a: !coco.tensor<4xi8, local>) {
  func.return
}

// -----

// CHECK: !coco.tensor shape must be static with positive sizes, got ?x4
func.func @dynamic(%a: !coco.tensor<?x4xf32, local>) {
  func.return
}

// -----

// CHECK: !coco.tensor shape must be static with positive sizes, got 0x4
func.func @empty_dim(%a: !coco.tensor<0x4xf32, local>) {
  func.return
}

// -----

// CHECK: sliced<2> is out of range for a tensor of rank 2 (the sliced dimension must be in 0..1)
func.func @sliced_range(%a: !coco.tensor<4x4xf32, sliced<2>>) {
  func.return
}

// -----

// CHECK: sliced<0> is out of range: a rank-0 tensor cannot be sliced
func.func @sliced_scalar(%a: !coco.tensor<f32, sliced<0>>) {
  func.return
}

// -----

// CHECK: 'coco.all_slice' op dimension 0 of !coco.tensor<6x4xf32, sliced<0>> (size 6) is not divisible by the world size 4 (coco.world_size)
builtin.module attributes {coco.world_size = 4 : i64} {
func.func @not_divisible(%a: !coco.tensor<6x4xf32, replicated>) {
  %s = coco.all_slice %a dim = 0 : (!coco.tensor<6x4xf32, replicated>) -> !coco.tensor<6x4xf32, sliced<0>>
  func.return
}
}

// -----

// A function argument is located where it is written.
// CHECK: invalid.mlir:[[# @LINE + 3]]:28: error: argument %b of @unused_argument: dimension 0 of !coco.tensor<6xf32, sliced<0>> (size 6) is not divisible by the world size 4 (coco.world_size)
builtin.module attributes {coco.world_size = 4 : i64} {
func.func @unused_argument(%a: !coco.tensor<8xf32, replicated>,
                           %b: !coco.tensor<6xf32, sliced<0>>) {
  func.return
}
}

// -----

// CHECK: 'coco.neg' op coco.world_size must be a positive integer (e.g. coco.world_size = 4 : i64), got 0 : i64
builtin.module attributes {coco.world_size = 0 : i64} {
func.func @bad_world(%a: !coco.tensor<4xf32, sliced<0>>) {
  %s = coco.neg %a : (!coco.tensor<4xf32, sliced<0>>) -> !coco.tensor<4xf32, sliced<0>>
  func.return
}
}

// -----

// CHECK: 'coco.add' op cannot combine a local operand with a sliced one
func.func @local_sliced(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<8xf32, sliced<0>>) {
  %c = coco.add %a, %b : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.mul' op sliced operands must cut the same dimension of the result, got dimensions [0, 1]
func.func @two_cuts(%a: !coco.tensor<4x8xf32, sliced<0>>, %b: !coco.tensor<4x8xf32, sliced<1>>) {
  %c = coco.mul %a, %b : (!coco.tensor<4x8xf32, sliced<0>>, !coco.tensor<4x8xf32, sliced<1>>) -> !coco.tensor<4x8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.sub' op operand shapes [4, 8] and [4] do not broadcast (dimension 1 of the result has sizes [4, 8])
func.func @no_broadcast(%a: !coco.tensor<4x8xf32, replicated>, %b: !coco.tensor<4xf32, replicated>) {
  %c = coco.sub %a, %b : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.add' op a sliced operand cannot be broadcast along its sliced dimension
func.func @sliced_broadcast(%a: !coco.tensor<1x8xf32, sliced<0>>, %b: !coco.tensor<4x8xf32, replicated>) {
  %c = coco.add %a, %b : (!coco.tensor<1x8xf32, sliced<0>>, !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.add' op result type must be !coco.tensor<8xf32, local> by the layout rules, got !coco.tensor<8xf32, replicated>
func.func @wrong_result(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<8xf32, replicated>) {
  %c = coco.add %a, %b : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.add' op operands must have the same element type (use coco.convert), got f32, f16
func.func @mixed(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<8xf16, local>) {
  %c = coco.add %a, %b : (!coco.tensor<8xf32, local>, !coco.tensor<8xf16, local>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.add' op does not take i1 operands (i1 is not arithmetic; use coco.select)
func.func @bool_add(%a: !coco.tensor<8xi1, local>) {
  %c = coco.add %a, %a : (!coco.tensor<8xi1, local>, !coco.tensor<8xi1, local>) -> !coco.tensor<8xi1, local>
  func.return
}

// -----

// CHECK: 'coco.pow' op needs floating-point operands, got i32
func.func @int_pow(%a: !coco.tensor<8xi32, local>) {
  %c = coco.pow %a, %a : (!coco.tensor<8xi32, local>, !coco.tensor<8xi32, local>) -> !coco.tensor<8xi32, local>
  func.return
}

// -----

// CHECK: 'coco.exp' op needs a floating-point operand, got i32
func.func @int_exp(%a: !coco.tensor<8xi32, local>) {
  %c = coco.exp %a : (!coco.tensor<8xi32, local>) -> !coco.tensor<8xi32, local>
  func.return
}

// -----

// CHECK: 'coco.neg' op does not take an i1 operand (i1 is not arithmetic)
func.func @bool_neg(%a: !coco.tensor<8xi1, local>) {
  %c = coco.neg %a : (!coco.tensor<8xi1, local>) -> !coco.tensor<8xi1, local>
  func.return
}

// -----

// CHECK: 'coco.cmp' op result type must be !coco.tensor<8xi1, local> by the layout rules, got !coco.tensor<8xf32, local>
func.func @cmp_result(%a: !coco.tensor<8xf32, local>) {
  %c = coco.cmp %a, %a predicate = lt : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.select' op condition must have element type i1, got f32
func.func @select_cond(%a: !coco.tensor<8xf32, local>) {
  %c = coco.select %a, %a, %a : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.convert' op result type must be !coco.tensor<8xf16, local> by the layout rules, got !coco.tensor<8xf16, replicated>
func.func @convert_layout(%a: !coco.tensor<8xf32, local>) {
  %c = coco.convert %a : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xf16, replicated>
  func.return
}

// -----

// CHECK: 'coco.constant' op result must be a replicated tensor, got !coco.tensor<f32, local>
func.func @constant_local() {
  %c = coco.constant 1.0 : !coco.tensor<f32, local>
  func.return
}

// -----

// CHECK: 'coco.constant' op value 1.5 is not an integer but the element type is i32
func.func @constant_int() {
  %c = coco.constant 1.5 : !coco.tensor<i32, replicated>
  func.return
}

// -----

// CHECK: 'coco.constant' op an i1 value must be true or false (1 or 0), got 2
func.func @constant_bool() {
  %c = coco.constant 2 : !coco.tensor<i1, replicated>
  func.return
}

// -----

// CHECK: 'coco.constant' op value 4294967296 does not fit in i32
func.func @constant_range() {
  %c = coco.constant 4294967296 : !coco.tensor<i32, replicated>
  func.return
}

// -----

// CHECK: 'coco.dropout' op probability must satisfy 0 <= p < 1, got p = 1.0
func.func @dropout_one(%a: !coco.tensor<8xf32, local>) {
  %c = coco.dropout %a p = 1.0 seed = 0 : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.dropout' op probability must satisfy 0 <= p < 1, got p = -0.1
func.func @dropout_negative(%a: !coco.tensor<8xf32, local>) {
  %c = coco.dropout %a p = -0.1 seed = 0 : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.dropout' op seed must be >= 0, got -1
func.func @dropout_seed(%a: !coco.tensor<8xf32, local>) {
  %c = coco.dropout %a p = 0.5 seed = -1 : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.dropout' op needs a floating-point operand, got i32
func.func @dropout_int(%a: !coco.tensor<8xi32, local>) {
  %c = coco.dropout %a p = 0.5 seed = 1 : (!coco.tensor<8xi32, local>) -> !coco.tensor<8xi32, local>
  func.return
}

// -----

// CHECK: 'coco.reduce' op result type must be !coco.tensor<8xf32, local> by the layout rules, got !coco.tensor<8xf32, sliced<0>>
func.func @reduce_sliced_dim(%a: !coco.tensor<8x8xf32, sliced<1>>) {
  %c = coco.reduce %a kind = sum dims = [1] : (!coco.tensor<8x8xf32, sliced<1>>) -> !coco.tensor<8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.reduce' op result type must be !coco.tensor<8xf32, sliced<0>> by the layout rules, got !coco.tensor<8xf32, local>
func.func @reduce_renumber(%a: !coco.tensor<4x8xf32, sliced<1>>) {
  %c = coco.reduce %a kind = max dims = [0] : (!coco.tensor<4x8xf32, sliced<1>>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.reduce' op dim 2 is out of range for an operand of rank 2
func.func @reduce_range(%a: !coco.tensor<4x8xf32, local>) {
  %c = coco.reduce %a kind = sum dims = [2] : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<4x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.reduce' op dims must be distinct, got [0, 0]
func.func @reduce_twice(%a: !coco.tensor<4x8xf32, local>) {
  %c = coco.reduce %a kind = sum dims = [0, 0] : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.reduce' op needs at least one dimension to reduce (dims = [...])
func.func @reduce_nothing(%a: !coco.tensor<4x8xf32, local>) {
  %c = coco.reduce %a kind = sum dims = [] : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<4x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.norm' op operand must be replicated or local, got sliced<0> (the norm of a sliced value is sqrt(all_reduce(reduce(a*a))))
func.func @norm_sliced(%a: !coco.tensor<8xf32, sliced<0>>) {
  %c = coco.norm %a : (!coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<f32, local>
  func.return
}

// -----

// CHECK: 'coco.matmul' op has no layout rule for lhs replicated and rhs local (allowed: replicated x replicated -> replicated
func.func @matmul_rep_local(%a: !coco.tensor<8x8xf32, replicated>, %b: !coco.tensor<8x8xf32, local>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x8xf32, replicated>, !coco.tensor<8x8xf32, local>) -> !coco.tensor<8x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.matmul' op has no layout rule for lhs sliced<1> and rhs replicated (allowed: replicated x replicated -> replicated
func.func @matmul_sliced_last_rep(%a: !coco.tensor<8x8xf32, sliced<1>>, %b: !coco.tensor<8x8xf32, replicated>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x8xf32, sliced<1>>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<8x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.matmul' op has no layout rule for lhs local and rhs local (allowed: replicated x replicated -> replicated
func.func @matmul_local_local(%a: !coco.tensor<8x8xf32, local>, %b: !coco.tensor<8x8xf32, local>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x8xf32, local>, !coco.tensor<8x8xf32, local>) -> !coco.tensor<8x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.matmul' op has no layout rule for lhs replicated and rhs sliced<0> (allowed: replicated x replicated -> replicated
func.func @matmul_rep_sliced0(%a: !coco.tensor<8x8xf32, replicated>, %b: !coco.tensor<8x8xf32, sliced<0>>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x8xf32, replicated>, !coco.tensor<8x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.matmul' op has no layout rule for lhs sliced<0> and rhs sliced<0> (allowed: replicated x replicated -> replicated
func.func @matmul_sliced0_sliced0(%a: !coco.tensor<8x8xf32, sliced<0>>, %b: !coco.tensor<8x8xf32, sliced<0>>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x8xf32, sliced<0>>, !coco.tensor<8x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.matmul' op has no layout rule for lhs sliced<1> and rhs sliced<1> (allowed: replicated x replicated -> replicated
func.func @matmul_sliced_last_sliced1(%a: !coco.tensor<8x8xf32, sliced<1>>, %b: !coco.tensor<8x8xf32, sliced<1>>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x8xf32, sliced<1>>, !coco.tensor<8x8xf32, sliced<1>>) -> !coco.tensor<8x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.matmul' op contraction sizes differ: lhs [8, 4] has K = 4 but rhs [8, 2] has K = 8
func.func @matmul_k(%a: !coco.tensor<8x4xf32, replicated>, %b: !coco.tensor<8x2xf32, replicated>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x4xf32, replicated>, !coco.tensor<8x2xf32, replicated>) -> !coco.tensor<8x2xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.matmul' op needs a lhs of rank >= 2 and a rhs of rank 2, got ranks 1 and 2
func.func @matmul_rank(%a: !coco.tensor<8xf32, replicated>, %b: !coco.tensor<8x2xf32, replicated>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8xf32, replicated>, !coco.tensor<8x2xf32, replicated>) -> !coco.tensor<2xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.matmul' op result type must be !coco.tensor<8x2xf32, sliced<1>> by the layout rules, got !coco.tensor<8x2xf32, sliced<0>>
func.func @matmul_result(%a: !coco.tensor<8x4xf32, replicated>, %b: !coco.tensor<4x2xf32, sliced<1>>) {
  %c = coco.matmul %a, %b : (!coco.tensor<8x4xf32, replicated>, !coco.tensor<4x2xf32, sliced<1>>) -> !coco.tensor<8x2xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.all_slice' op operand must be replicated, got local
func.func @all_slice_local(%a: !coco.tensor<8xf32, local>) {
  %c = coco.all_slice %a dim = 0 : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.all_slice' op dim 1 is out of range for an operand of rank 1
func.func @all_slice_dim(%a: !coco.tensor<8xf32, replicated>) {
  %c = coco.all_slice %a dim = 1 : (!coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.all_reduce' op operand must be local or replicated, got sliced<0>
func.func @all_reduce_sliced(%a: !coco.tensor<8xf32, sliced<0>>) {
  %c = coco.all_reduce %a reduction = sum : !coco.tensor<8xf32, sliced<0>> -> !coco.tensor<8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.all_reduce' op result type must be !coco.tensor<8xf32, replicated> by the layout rules, got !coco.tensor<8xf32, local>
func.func @all_reduce_result(%a: !coco.tensor<8xf32, local>) {
  %c = coco.all_reduce %a reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.reduce_scatter' op operand must be local, got replicated
func.func @reduce_scatter_rep(%a: !coco.tensor<8xf32, replicated>) {
  %c = coco.reduce_scatter %a reduction = sum dim = 0 : !coco.tensor<8xf32, replicated> -> !coco.tensor<8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.reduce_scatter' op dim 1 is out of range for an operand of rank 1
func.func @reduce_scatter_dim(%a: !coco.tensor<8xf32, local>) {
  %c = coco.reduce_scatter %a reduction = sum dim = 1 : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.all_gather' op operand must be sliced, got local
func.func @all_gather_local(%a: !coco.tensor<8xf32, local>) {
  %c = coco.all_gather %a : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.broadcast' op operand must be local, got replicated
func.func @broadcast_rep(%a: !coco.tensor<8xf32, replicated>) {
  %c = coco.broadcast %a root = 0 : !coco.tensor<8xf32, replicated> -> !coco.tensor<8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.broadcast' op root 4 is not a rank of the group of 4
builtin.module attributes {coco.world_size = 4 : i64} {
func.func @broadcast_root(%a: !coco.tensor<8xf32, local>) {
  %c = coco.broadcast %a root = 4 : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  func.return
}
}

// -----

// CHECK: 'coco.all_to_all' op operand must be sliced, got replicated
func.func @all_to_all_rep(%a: !coco.tensor<8x8xf32, replicated>) {
  %c = coco.all_to_all %a dim = 1 : !coco.tensor<8x8xf32, replicated> -> !coco.tensor<8x8xf32, sliced<1>>
  func.return
}

// -----

// CHECK: 'coco.update' op operand 'value' at position 1 does not verify:
// CHECK-NEXT: attribute !coco.tensor<8xf32, replicated> expected from variable 'T', but got !coco.tensor<8xf32, local>
func.func @update_type(%w: !coco.tensor<8xf32, replicated>, %g: !coco.tensor<8xf32, local>) {
  "coco.update"(%w, %g) : (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, local>) -> ()
  func.return
}

// -----

// CHECK: 'coco.update' op parameter must be an argument of the enclosing function
func.func @update_value(%w: !coco.tensor<8xf32, replicated>) {
  %n = coco.neg %w : (!coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  coco.update %n, %w : !coco.tensor<8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.update' op parameter %w is updated 2 times; a parameter may be updated by at most one coco.update
func.func @update_twice(%w: !coco.tensor<8xf32, replicated>) {
  coco.update %w, %w : !coco.tensor<8xf32, replicated>
  coco.update %w, %w : !coco.tensor<8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.send' op needs exactly one coco.recv from @producer on channel 0 in stage @consumer, found 0
func.func @producer(%a: !coco.tensor<8xf32, local>) {
  coco.send %a to @consumer channel = 0 : !coco.tensor<8xf32, local>
  func.return
}
func.func @consumer() {
  func.return
}

// -----

// CHECK: 'coco.send' op names stage @nowhere, which is not a function of the module
func.func @producer(%a: !coco.tensor<8xf32, local>) {
  coco.send %a to @nowhere channel = 0 : !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.recv' op names stage @ghost, which is not a function of the module
func.func @consumer() {
  %a = coco.recv from @ghost channel = 0 : !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.recv' op needs exactly one coco.send to @consumer on channel 1 in stage @producer, found 0
func.func @producer(%a: !coco.tensor<8xf32, local>) {
  coco.send %a to @consumer channel = 0 : !coco.tensor<8xf32, local>
  func.return
}
func.func @consumer() {
  %a = coco.recv from @producer channel = 0 : !coco.tensor<8xf32, local>
  %b = coco.recv from @producer channel = 1 : !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.send' op sends !coco.tensor<8xf32, local> but the matching coco.recv in @consumer receives !coco.tensor<8xf16, local>
func.func @producer(%a: !coco.tensor<8xf32, local>) {
  coco.send %a to @consumer channel = 0 : !coco.tensor<8xf32, local>
  func.return
}
func.func @consumer() {
  %a = coco.recv from @producer channel = 0 : !coco.tensor<8xf16, local>
  func.return
}

// -----

// CHECK: 'coco.recv' op needs exactly one coco.send to @consumer on channel 0 in stage @producer, found 2
func.func @producer(%a: !coco.tensor<8xf32, local>) {
  coco.send %a to @consumer channel = 0 : !coco.tensor<8xf32, local>
  coco.send %a to @consumer channel = 0 : !coco.tensor<8xf32, local>
  func.return
}
func.func @consumer() {
  %a = coco.recv from @producer channel = 0 : !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.send' op cannot name its own stage @loop
func.func @loop(%a: !coco.tensor<8xf32, local>) {
  coco.send %a to @loop channel = 0 : !coco.tensor<8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.send' op needs exactly one coco.recv from @producer on channel 0 in stage @consumer, found 2
func.func @producer(%a: !coco.tensor<8xf32, local>) {
  coco.send %a to @consumer channel = 0 : !coco.tensor<8xf32, local>
  func.return
}
func.func @consumer() {
  %a = coco.recv from @producer channel = 0 : !coco.tensor<8xf32, local>
  %b = coco.recv from @producer channel = 0 : !coco.tensor<8xf32, local>
  func.return
}
