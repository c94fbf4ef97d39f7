"""convert-coco-to-gpu on random well-typed programs (`strategies.programs`),
as written and after coco-optimize: the conversion does not raise, its output
verifies, and the device-level program computes what the interpreter computes
(device_eval.py), within the program's tolerance."""

from __future__ import annotations

import numpy as np
from device_eval import run_device
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Program, programs, scaled_examples

import coconet_ir as cc
from coconet_ir.ir import parse, to_text, verify


def check_lowering(program: Program, world: int, optimize: bool) -> None:
    module = parse(to_text(program.module))
    if optimize:
        module = cc.Pipeline("coco-optimize")(module)
    expected = cc.interpret(module, world, seed=world)
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(
        parse(to_text(module))
    )
    verify(lowered)
    got = run_device(lowered, world, expected.inputs)
    for key, output in expected.outputs.items():
        try:
            np.testing.assert_allclose(
                got[key].astype(np.float64),
                output.value.astype(np.float64),
                rtol=program.rtol,
                atol=program.atol,
                err_msg=f"{key} on {world} ranks",
            )
        except AssertionError as failure:
            # The lowered program printed on failure only: printing it for
            # every output was half of this file's time.
            raise AssertionError(f"{failure}\n{to_text(lowered)}") from None


@settings(max_examples=scaled_examples(40), deadline=None)
@given(program=programs(), data=st.data())
def test_random_programs_lower_correctly(program: Program, data: st.DataObject):
    world = data.draw(st.sampled_from(program.worlds), label="world")
    check_lowering(program, world, optimize=False)


@settings(max_examples=scaled_examples(25), deadline=None)
@given(program=programs(), data=st.data())
def test_random_optimized_programs_lower_correctly(
    program: Program, data: st.DataObject
):
    world = data.draw(st.sampled_from(program.worlds), label="world")
    check_lowering(program, world, optimize=True)
