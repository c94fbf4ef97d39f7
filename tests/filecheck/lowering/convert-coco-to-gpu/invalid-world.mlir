// RUN: not coconet-opt %s -p 'convert-coco-to-gpu{world=2}' 2>&1 | filecheck %s
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s --check-prefix=SAME
// The option and the module's coco.world_size must agree.

// CHECK: error: 'builtin.module' op convert-coco-to-gpu: the option world=2 disagrees with the module's coco.world_size = 4; they must be equal
// SAME: builtin.module attributes {gpu.container_module, coco.world_size = 4 : i64}
module attributes {coco.world_size = 4 : i64} {
  func.func @f(%x: !coco.tensor<8xf32, sliced<0>>) {
    func.return
  }
}
