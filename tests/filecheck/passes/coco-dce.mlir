// RUN: coconet-opt %s -p coco-dce | filecheck %s
// RUN: coconet-opt %s -p 'coco-dce{op=dead_ar}' | filecheck %s --check-prefix=ONE
// RUN: not coconet-opt %s -p 'coco-dce{op=used}' 2>&1 | filecheck %s --check-prefix=ERR-USED
// RUN: not coconet-opt %s -p 'coco-dce{op=send0}' 2>&1 | filecheck %s --check-prefix=ERR-SEND
// RUN: not coconet-opt %s -p 'coco-dce{op=sending_region}' 2>&1 | filecheck %s --check-prefix=ERR-REGION
// RUN: not coconet-opt %s -p 'coco-dce{op=nothing}' 2>&1 | filecheck %s --check-prefix=ERR-NONE
// The oracle: every stage's outputs and updates agree on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-dce -o %t
// RUN: coconet-run --compare %s %t --world 2
// RUN: coconet-run --compare %s %t --world 4
// RUN: coconet-run --compare %s %t --world 8

// Dead compute, dead collectives (a reduce_scatter made dead by removing its
// all_gather goes in the same walk), a dead fusion region and a dead op inside
// a live one go; sends, recvs, updates and a region holding a send stay.

// CHECK-LABEL: func.func @s1
// CHECK-NEXT:    %[[LIVE:.*]] = coco.all_reduce %g reduction = sum {name = "live"}
// CHECK-NEXT:    %[[K:.*]] = coco.fusion (%[[LIVE]])
// CHECK-NEXT:    ^{{.*}}(%[[KX:.*]]: !coco.tensor<8x16xf32, replicated>):
// CHECK-NEXT:      %[[KY:.*]] = coco.neg %[[KX]]
// CHECK-NEXT:      coco.yield %[[KY]]
// CHECK-NEXT:    }
// CHECK-NEXT:    coco.fusion (%[[K]]) {name = "sending_region"}
// CHECK-NEXT:    ^{{.*}}(%[[V:.*]]: !coco.tensor<8x16xf32, replicated>):
// CHECK-NEXT:      coco.send %[[V]] to @s2 channel = 1
// CHECK-NEXT:      coco.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    coco.send %[[K]] to @s2 channel = 0 {name = "send0"}
// CHECK-NEXT:    %[[W1:.*]] = coco.sub %w, %[[K]]
// CHECK-NEXT:    coco.update %w, %[[W1]]
// CHECK-NEXT:    %[[USED:.*]] = coco.add %x, %x {name = "used"}
// CHECK-NEXT:    func.return %[[USED]]
// CHECK-LABEL: func.func @s2
// CHECK-NEXT:    %{{.*}} = coco.recv from @s1 channel = 0
// CHECK-NEXT:    %[[R1:.*]] = coco.recv from @s1 channel = 1
// CHECK-NEXT:    func.return %[[R1]]

// op=NAME removes that op only; what it leaves dead stays.
// ONE-LABEL: func.func @s1
// ONE-NEXT:    coco.exp
// ONE-NEXT:    coco.neg
// ONE-NEXT:    coco.reduce_scatter
// ONE-NEXT:    coco.all_gather
// ONE-NEXT:    coco.all_reduce %g reduction = sum {name = "live"}
// ONE-NOT:     dead_ar
// ONE-LABEL: func.func @s2

// ERR-USED: coco-dce.mlir:[[# @LINE + 32]]:3: error: 'coco.add' op coco-dce cannot apply: its result is used by 'func.return'
// ERR-SEND: coco-dce.mlir:[[# @LINE + 28]]:3: error: 'coco.send' op coco-dce cannot apply: 'coco.send' has an effect besides its results
// ERR-REGION: coco-dce.mlir:[[# @LINE + 22]]:3: error: 'coco.fusion' op coco-dce cannot apply: its region holds 'coco.send', which has an effect
// ERR-NONE: error: coco-dce: no op named "nothing" that this pass applies to
func.func @s1(%g: !coco.tensor<8x16xf32, local>,
              %x: !coco.tensor<8x16xf32, replicated>,
              %w: !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated> {
  %a = coco.exp %x : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %b = coco.neg %a : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %rs = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, sliced<0>>
  %ag = coco.all_gather %rs : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  %ar = coco.all_reduce %g reduction = max {name = "dead_ar"} : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %live = coco.all_reduce %g reduction = sum {name = "live"} : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %f = coco.fusion (%live) : (!coco.tensor<8x16xf32, replicated>) -> (!coco.tensor<8x16xf32, replicated>) {
  ^bb0(%fx: !coco.tensor<8x16xf32, replicated>):
    %fy = coco.exp %fx : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
    coco.yield %fy : !coco.tensor<8x16xf32, replicated>
  }
  %k = coco.fusion (%live) : (!coco.tensor<8x16xf32, replicated>) -> (!coco.tensor<8x16xf32, replicated>) {
  ^bb0(%kx: !coco.tensor<8x16xf32, replicated>):
    %ky = coco.neg %kx : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
    %kz = coco.exp %kx : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
    coco.yield %ky : !coco.tensor<8x16xf32, replicated>
  }
  coco.fusion (%k) {name = "sending_region"} : (!coco.tensor<8x16xf32, replicated>) -> () {
  ^bb0(%v: !coco.tensor<8x16xf32, replicated>):
    coco.send %v to @s2 channel = 1 : !coco.tensor<8x16xf32, replicated>
    coco.yield
  }
  coco.send %k to @s2 channel = 0 {name = "send0"} : !coco.tensor<8x16xf32, replicated>
  %w1 = coco.sub %w, %k : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<8x16xf32, replicated>
  %used = coco.add %x, %x {name = "used"} : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %used : !coco.tensor<8x16xf32, replicated>
}

func.func @s2() -> !coco.tensor<8x16xf32, replicated> {
  %r0 = coco.recv from @s1 channel = 0 : !coco.tensor<8x16xf32, replicated>
  %r1 = coco.recv from @s1 channel = 1 : !coco.tensor<8x16xf32, replicated>
  %n = coco.neg %r1 {name = "dead_neg"} : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %r1 : !coco.tensor<8x16xf32, replicated>
}
