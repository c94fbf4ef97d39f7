// RUN: coconet-opt %s --split-input-file | filecheck %s
// RUN: coconet-opt %s --split-input-file -p canonicalize,cse --print-op-generic | filecheck %s --check-prefix=GENERIC

// Each chunk is its own module; the output keeps the separators.

// CHECK-LABEL: func.func @first
// CHECK-NEXT:    %s = coco.all_reduce %g reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
// CHECK:       // {{-}}----
// CHECK-LABEL: func.func @second
// CHECK-NEXT:    %r = coco.all_gather %a : !coco.tensor<8xf32, sliced<0>> -> !coco.tensor<8xf32, replicated>

// GENERIC:     "builtin.module"() ({
// GENERIC:       "coco.all_reduce"(%g) <{reduction = #coco<reduction sum>}> : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, replicated>
// GENERIC:     // {{-}}----
// GENERIC:       "coco.all_gather"(%a) : (!coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<8xf32, replicated>

func.func @first(%g: !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, replicated> {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  func.return %s : !coco.tensor<8xf32, replicated>
}

// -----

func.func @second(%a: !coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<8xf32, replicated> {
  %r = coco.all_gather %a : !coco.tensor<8xf32, sliced<0>> -> !coco.tensor<8xf32, replicated>
  func.return %r : !coco.tensor<8xf32, replicated>
}
