// RUN: coconet-opt --split-input-file --verify-diagnostics %s | filecheck %s
// coco.concat's and coco.split's rules (docs/dialect.md, "Buckets"): each
// rejected with a diagnostic that names the op and states the rule.

// CHECK: 'coco.concat' op operand 1 (!coco.tensor<8xf32, replicated>) must have the element type and layout of the flat tensor (f32, local)
func.func @mixed_layouts(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<8xf32, replicated>) {
  // expected-error @+1 {{'coco.concat' op operand 1 (!coco.tensor<8xf32, replicated>) must have the element type and layout of the flat tensor (f32, local)}}
  %f = "coco.concat"(%a, %b) : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<16xf32, local>
  func.return
}

// -----

// CHECK: 'coco.concat' op the flat tensor has 12 elements, but the operands have 16
func.func @wrong_size(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<8xf32, local>) {
  // expected-error @+1 {{'coco.concat' op the flat tensor has 12 elements, but the operands have 16}}
  %f = coco.concat %a, %b : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<12xf32, local>
  func.return
}

// -----

// CHECK: 'coco.concat' op operand 0 must be replicated, local or sliced<0>, got sliced<1>
func.func @sliced_one(%a: !coco.tensor<8x8xf32, sliced<1>>) {
  // expected-error @+1 {{'coco.concat' op operand 0 must be replicated, local or sliced<0>, got sliced<1> (a rank's block must be a contiguous run of the flattened tensor)}}
  %f = "coco.concat"(%a) : (!coco.tensor<8x8xf32, sliced<1>>) -> !coco.tensor<64xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.concat' op the flat tensor must be 1-D, got !coco.tensor<2x8xf32, local>
func.func @not_flat(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<8xf32, local>) {
  // expected-error @+1 {{'coco.concat' op the flat tensor must be 1-D, got !coco.tensor<2x8xf32, local>}}
  %f = coco.concat %a, %b : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<2x8xf32, local>
  func.return
}

// -----

// CHECK: 'coco.concat' op operand 0 (!coco.tensor<f32, local>) is rank 0: a bucket's pieces are cut into one block per rank
func.func @scalar(%a: !coco.tensor<f32, local>) {
  // expected-error @+1 {{'coco.concat' op operand 0 (!coco.tensor<f32, local>) is rank 0: a bucket's pieces are cut into one block per rank}}
  %f = coco.concat %a : (!coco.tensor<f32, local>) -> !coco.tensor<1xf32, local>
  func.return
}

// -----

// CHECK: 'coco.concat' op operand 1 (!coco.tensor<6xf32, local>) has 6 elements, not divisible by the world size 4 (coco.world_size): a bucket holds one block of every piece per rank
builtin.module attributes {coco.world_size = 4 : i64} {
  func.func @indivisible(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<6xf32, local>) {
    // expected-error @+1 {{'coco.concat' op operand 1 (!coco.tensor<6xf32, local>) has 6 elements, not divisible by the world size 4 (coco.world_size): a bucket holds one block of every piece per rank}}
    %f = coco.concat %a, %b : (!coco.tensor<8xf32, local>, !coco.tensor<6xf32, local>) -> !coco.tensor<14xf32, local>
    func.return
  }
}

// -----

// CHECK: 'coco.split' op needs at least one result
func.func @no_pieces(%f: !coco.tensor<8xf32, local>) {
  // expected-error @+1 {{'coco.split' op needs at least one result}}
  "coco.split"(%f) : (!coco.tensor<8xf32, local>) -> ()
  func.return
}

// -----

// CHECK: 'coco.split' op result 0 (!coco.tensor<4xf64, local>) must have the element type and layout of the flat tensor (f32, local)
func.func @other_type(%f: !coco.tensor<8xf32, local>) {
  // expected-error @+1 {{'coco.split' op result 0 (!coco.tensor<4xf64, local>) must have the element type and layout of the flat tensor (f32, local)}}
  %a, %b = coco.split %f : (!coco.tensor<8xf32, local>) -> (!coco.tensor<4xf64, local>, !coco.tensor<4xf32, local>)
  func.return
}

// -----

// CHECK: 'coco.split' op the flat tensor has 8 elements, but the results have 12
func.func @too_many(%f: !coco.tensor<8xf32, local>) {
  // expected-error @+1 {{'coco.split' op the flat tensor has 8 elements, but the results have 12}}
  %a, %b = coco.split %f : (!coco.tensor<8xf32, local>) -> (!coco.tensor<4xf32, local>, !coco.tensor<8xf32, local>)
  func.return
}
