"""The `roofline` command line.

Sub-commands live in their own modules and are imported only when invoked, so that
`roofline analyze` starts fast (no pandas/matplotlib/cupy at import time).
"""
from __future__ import annotations

import importlib
import sys

import click

# name -> "module:attribute" of a click command; the single registry of sub-commands.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("roofline.commands.analyze:analyze", "Analyse a profile_topN.json into profile_roofline.{json,md}."),
    "topn": ("roofline.ingest.cli:topn", "Build a profile_topN.json from a PyTorch trace or an Nsight Compute report."),
    "peaks": ("roofline.commands.peaks:peaks", "List, show, validate or measure hardware peak tables."),
    "ladder": ("roofline.ladder.cli:ladder", "The hand-written sm_90a GEMM ladder: list, run, bench, plot."),
    "rerun": ("roofline.commands.rerun:rerun", "Stage C: re-run GEMM heads in isolation through the ladder."),
    "plot": ("roofline.plot:plot_cmd", "Draw the roofline picture of a profile_roofline.json."),
    "playbook": ("roofline.commands.playbook:playbook", "Summarize predicted vs measured records and propose priors."),
    "calc": ("roofline.commands.calc:calc", "The roofline calculator (seed 001): t_compute vs t_HBM, AI vs ridge, crossover; --html page."),
    "feedback": ("roofline.commands.feedback:feedback", "Record a measured speedup: noise bands, contradiction flag, playbook."),
    "compare": ("roofline.commands.feedback:compare", "Round A vs round B: measured change per kernel against A's prediction."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx, name):
        spec = LAZY_COMMANDS.get(name)
        if spec is None:
            return None
        target = spec[0]
        mod_name, attr = target.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:  # a piece not built/installed yet
            if exc.name and exc.name.startswith("roofline"):
                return _unavailable(name, spec[1], f"{mod_name} is not available in this install")
            raise
        return getattr(mod, attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, LAZY_COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str, help_text: str, why: str) -> click.Command:
    @click.command(name=name, help=help_text, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def cmd(args):
        click.echo(f"roofline {name}: {why}", err=True)
        sys.exit(2)

    return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="roofline")
def main():
    """roofline: which GPU kernel of a serving run still has headroom, what it is worth
    end to end, and what kind of fix it needs.

    Start with `roofline analyze profile_topN.json` (see `roofline analyze --help`).
    """


if __name__ == "__main__":  # pragma: no cover
    main()
