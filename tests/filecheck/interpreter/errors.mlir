// coconet-run on bad requests: one diagnostic, exit 1 for a program that does
// not parse, verify or run, exit 2 for bad usage.

// RUN: not coconet-run %s 2>&1 | filecheck %s --check-prefix=NOWORLD
// RUN: not coconet-run %s --world 0 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not coconet-run %s --world 3 2>&1 | filecheck %s --check-prefix=DIVIDE
// RUN: not coconet-run %s --world 2 --stats 2>&1 | filecheck %s --check-prefix=EMU
// RUN: not coconet-run %s --world 2 -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not coconet-run %s --world 2 --entry nope 2>&1 | filecheck %s --check-prefix=ENTRY
// RUN: sed -e 's/dim = 0/dim = 9/' %s > %t.bad.mlir
// RUN: not coconet-run %t.bad.mlir --world 2 2>&1 | filecheck %s --check-prefix=VERIFY

// NOWORLD: coconet-run: error: the world size is unknown: pass --world N or give the module a coco.world_size attribute
// ZERO:    coconet-run: error: --world must be at least 1, got 0
// DIVIDE:  errors.mlir:[[# @LINE + 15]]:3: error: 'coco.reduce_scatter' op dimension 0 {{.*}} is not divisible by the world size 3
// EMU:     coconet-run: error: --stats only applies to --backend emu
// PASS:    coconet-run: error: unknown pass 'no-such-pass'
// ENTRY:   error: {{.*}}@nope
// VERIFY:  bad.mlir:[[# @LINE + 11]]:3: error: 'coco.reduce_scatter' op dim 9 is out of range
// VERIFY-NOT: Traceback

// NOWORLD-NOT: Traceback
// ZERO-NOT: Traceback
// DIVIDE-NOT: Traceback
// EMU-NOT: Traceback
// PASS-NOT: Traceback
// ENTRY-NOT: Traceback

func.func @f(%g: !coco.tensor<16xf32, local>) -> !coco.tensor<16xf32, sliced<0>> {
  %rs = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, sliced<0>>
  func.return %rs : !coco.tensor<16xf32, sliced<0>>
}
