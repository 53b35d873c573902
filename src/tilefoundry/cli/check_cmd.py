"""``tilefoundry check``: judge a runtime twin against the evaluator on its Module, with stated predicates.

This module declares the command (its help and options) and imports nothing heavy, so that ``--help`` is
quick; the check itself is :mod:`.check_run`.
"""

from __future__ import annotations

import argparse

from .options import SEED, add_device_option

DEFAULT_EXTENT = 3
"""The extent of a DimVar no ``--dim`` names, clamped into its range [lo, hi)."""

DEFAULT_INT_RANGE = (0, 2)
"""Random integer weights, and integer inputs whose use the IR does not tell, are drawn from [lo, hi)."""

NAME = "check"
HELP = "judge a runtime twin against the evaluator on its Module, output by output, with stated predicates"
DESCRIPTION = f"""\
Run a runtime twin and the reference evaluator on the same weights and inputs, and judge every output
with the predicates you state. Prints a table (or --json); exit status 0 only when every predicate of the
printed report passes, 1 when one fails or the code under check fails, 2 when the check is refused (one
line on stderr, `tilefoundry check: refused: ...`, names what to fix).

Code under check that raises (any exception, SystemExit included: importing FILE.py, building the twin,
running a twin kernel, a method or the reference) is that callable's failure: a FAIL row names it and the
exception, and the other callables are still judged.

a family checkpoint: --ckpt DIR and no target
  DIR holds a model of a supported family (`tilefoundry models`): a Hugging Face folder, or the output of
  `tilefoundry prepare`. Both sides are built from it: the family's Module read by the evaluator (the
  reference) and its runtime twin, loaded from the same weights. They run what generation runs: the model's
  step on a random prompt (prefill), then on one more token (decode), with the inputs the model's own
  init_caches / prepare_inputs_for_generation make, so every position and cache is one generation uses.
  Judged: both steps (prefill.forward, decode.forward: logits and caches), and every kernel of the twin on
  the arguments the reference gave that function in that step (prefill.layer0.attend, ...); --per-node
  adds every node's step (prefill.layer0.forward). --dim seq=N sets the prompt's length (default
  {DEFAULT_EXTENT}), --dim capacity=N the caches' (default seq + 1), --seed the tokens.
  Predicates default to rel_l2 with a bound by dtype, max=1e-5 on f32 (5e-3 f16, 2e-2 bf16) for a kernel
  or a node's step, times sqrt(layers) for the model's steps, where rounding grows with depth; --expect
  LABEL:PATH=PRED states one output's, --expect '*=PRED' every output's instead.

target: FILE.py:Name[.child...][.member]  (or MODULE:Name..., a module imported by its dotted name)
  Name     a global of FILE.py:
             a @runtime_module class  the candidate; the reference is the evaluator on the Module it stands
                                      for (its .module), read through Module.load (a LoadedModule);
             a @module Module, or     no candidate twin: the evaluator runs alone and only predicates that
             a bare @func Function    judge one side apply (nan_inf, the default there); a smoke test.
           A RuntimeModule whose .module is None (hand-written, compiled) is refused: there is nothing to
           judge it against.
  .child   walks the child tree (.layer1.ffn): that node is checked, its weights read under its path.
  .member  a function of the node (kernel vs LoadedModule function, activations alone) or an orchestration
           method; without it the node's step is checked: its forward method, else its entry function.

weights: random unless --ckpt DIR, one set shared by both sides.
  --ckpt DIR   a safetensors folder (model.safetensors, or shards + model.safetensors.index.json), or a
               Hugging Face model id (owner/name[@revision]) already in the local Hugging Face cache, read
               with the model's alias table ({{canonical: raw}}): the ALIAS attribute of the selected root
               (a twin class attribute), else the ALIAS global of FILE.py; --alias NAME uses the global NAME
               instead; --no-alias reads names as they are (a folder written by Module.prepare).
  random       floats N(0, 1), a weight of rank >= 2 scaled by 1/sqrt(shape[-2]); integers uniform in
               --int-range LO:HI (default {DEFAULT_INT_RANGE[0]}:{DEFAULT_INT_RANGE[1]}); booleans 0/1;
               seeded by --seed.

inputs: random (seeded by --seed and the checked callable's name) or --inputs FILE.
  A function takes its declared activations. A method takes its positional parameters without defaults;
  each one's type is its Tensor[...] annotation, else the type of the activation of the same name in the
  node's functions (its own first, then its children's, breadth first). Without a type, give --inputs.
  An integer is drawn for what it feeds, as the IR says: an index (index_select) lies in the axis it
  indexes (token ids in the vocabulary); positions (rope's pos_ids, the key positions a causal mask
  compares them with, a cache_update's position and count) make one causal step: S new positions after
  the ones held, every query seeing key 0, written inside the cache. Other integers are uniform in
  --int-range. The header names what each integer was drawn for.
  --inputs FILE  .safetensors keyed by parameter name (a tuple argument as name.0, name.1, ...), or .pt
                 holding a tuple of arguments, a dict by parameter name, or one tensor. Each tensor is
                 validated against its parameter's type (dtype, shape, DimVar ranges) before anything runs.
  --dim NAME=N   the extent of DimVar NAME (repeatable); default {DEFAULT_EXTENT} clamped into the DimVar's [lo, hi).

predicates: --expect PATH=PRED, repeatable; every output needs at least one.
  PATH   as the table prints it: output (a bare tensor), output[0], output[1][0] (nested tuples);
         '*' covers every output not named (a continuous PRED on an integer or boolean output becomes
         equal under '*', the only comparison meaningful there); with --per-node or in a family check,
         LABEL:PATH names one callable's output (labels as printed, e.g. layer1.ffn.mlp:output).
  PRED   allclose:atol=A,rtol=R  rel_l2:max=M  cosine:min=M  ulp:max=M  max_abs:max=M  max_rel:max=M
         equal  nan_inf. Repeat a PATH to give it several predicates.
  NaN/Inf  every PRED but nan_inf fails on a NaN on either side, unless it is given equal_nan
         (allclose:atol=1e-3,rtol=1e-3,equal_nan; equal:equal_nan), which counts NaNs at the same
         positions as equal; an Inf of the same sign at the same position on both sides counts as equal,
         any other Inf fails; the note counts the non-finite elements. nan_inf asserts finiteness alone.
  With a target and a reference there is no default; without a reference the default is '*=nan_inf'.

--per-node also checks the step of every node under the selection and every kernel, each on its own random
inputs (labels are dotted paths from the root: layer0.forward, layer0.attn.attend), so a table row names
the node that is off. A node whose step is only its entry function is checked once, as that kernel;
a selected function is checked alone.

examples (each runs as printed; give your own checkpoint folder in place of ~/models/Qwen3-0.6B):

  tilefoundry check --ckpt ~/models/Qwen3-0.6B
  tilefoundry check --ckpt ~/models/Qwen3-0.6B --per-node --dim seq=8 --json

  The module tilefoundry.examples.check_twin (it ships with TileFoundry) authors a two-layer Model
  (@module), its faithful twin ModelTwin, and BrokenTwin, whose layer1 MLP kernel computes gelu where the
  Model says silu. Check BrokenTwin node by node and as a whole:

  tilefoundry check tilefoundry.examples.check_twin:BrokenTwin --per-node --dim seq=4 --expect '*=rel_l2:max=1e-5'

  path                       shape    dtype  ref_norm  predicate  bound      measured            verdict
  -------------------------  -------  -----  --------  ---------  ---------  ------------------  -------
  forward:output[0]          (4, 11)  f32    4.1693    rel_l2     max=1e-05  rel_l2=0.00230799   FAIL
  forward:output[1]          (4,)     i64    12.2474   equal      -          mismatches=0        PASS
  embed:output               (4, 8)   f32    1.33156   rel_l2     max=1e-05  rel_l2=0            PASS
  ...
  layer0.ffn.mlp:output      (4, 8)   f32    6.57722   rel_l2     max=1e-05  rel_l2=0            PASS
  layer1.forward:output      (4, 8)   f32    7.97931   rel_l2     max=1e-05  rel_l2=0.0257769    FAIL
  layer1.attn.attend:output  (4, 8)   f32    6.46186   rel_l2     max=1e-05  rel_l2=8.41617e-08  PASS
  layer1.ffn.mlp:output      (4, 8)   f32    3.57065   rel_l2     max=1e-05  rel_l2=0.0452717    FAIL
  FAIL: 3 of 11 outputs failed (forward:output[0], layer1.forward:output, layer1.ffn.mlp:output)

  The rows name the node that is off (layer1.ffn.mlp); the exit status is 1. Check that one node alone with
  tilefoundry check tilefoundry.examples.check_twin:BrokenTwin.layer1.ffn.mlp --expect 'output=rel_l2:max=1e-5'
  (it fails the same way; tilefoundry.examples.check_twin:ModelTwin passes every row).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``tilefoundry check``."""
    parser.add_argument("target", nargs="?", metavar="FILE.py:Name[.child...][.member]",
                        help="what to check (see above); leave it out to check a family checkpoint, --ckpt DIR")
    parser.add_argument("--expect", action="append", default=[], metavar="PATH=PRED",
                        help="predicate(s) for an output; repeatable ('*' for every output not named)")
    parser.add_argument("--per-node", action="store_true",
                        help="also check every node's step and every kernel under the selection")
    parser.add_argument("--ckpt", metavar="DIR", help="with a target: read weights from this safetensors folder, or "
                        "from a Hugging Face model id already in the local Hugging Face cache (default: random); "
                        "without one: the family checkpoint whose runtime twin to check")
    alias = parser.add_mutually_exclusive_group()
    alias.add_argument("--alias", metavar="NAME", help="the global of FILE.py holding the alias table")
    alias.add_argument("--no-alias", action="store_true", help="read --ckpt names as they are")
    parser.add_argument("--inputs", metavar="FILE", help=".safetensors or .pt file of inputs (default: random)")
    parser.add_argument("--seed", type=SEED, default=0,
                        help="seed of random weights and inputs, in [0, 2**64) (default 0)")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="a DimVar extent; repeatable")
    parser.add_argument("--int-range", default=f"{DEFAULT_INT_RANGE[0]}:{DEFAULT_INT_RANGE[1]}", metavar="LO:HI",
                        help="range of random integers, half-open (default %(default)s)")
    add_device_option(parser, "where weights and inputs are placed")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """Run the check; 0 pass, 1 fail (a predicate, or the code under check), 2 refused (raises Refusal)."""
    from .check_run import run_check

    return run_check(args)
