"""The `roofline` command line.

Sub-commands live in their own modules and are imported only when invoked, so that
`roofline analyze` starts fast (no pandas/matplotlib/cupy at import time).
"""
from __future__ import annotations

import importlib
import re
import sys

import click

# name -> "module:attribute" of a click command; the single registry of sub-commands.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("roofline.commands.analyze:analyze", "Analyse a profile_topN.json into profile_roofline.{json,md}."),
    "topn": ("roofline.commands.topn:topn", "Build a profile_topN.json from a PyTorch trace or an Nsight Compute report."),
    "peaks": ("roofline.commands.peaks:peaks", "List, show, validate or measure hardware peak tables."),
    "ladder": ("roofline.ladder.cli:ladder", "The hand-written sm_90a GEMM ladder: list, run, bench, render, plot, advise."),
    "rerun": ("roofline.commands.rerun:rerun", "Stage C: re-run GEMM heads in isolation through the ladder."),
    "plot": ("roofline.commands.plot:plot_cmd", "Draw the roofline picture of a profile_roofline.json."),
    "playbook": ("roofline.commands.playbook:playbook", "Summarize predicted vs measured records and propose priors."),
    "calc": ("roofline.commands.calc:calc", "The roofline calculator: t_compute vs t_HBM, AI vs ridge, crossover; --html page."),
    "feedback": ("roofline.commands.feedback:feedback", "Record a measured speedup: noise bands, contradiction flag, playbook."),
    "compare": ("roofline.commands.feedback:compare", "Round A vs round B: measured change per kernel against A's prediction."),
}


# click's message for a path option that names nothing; said as the commands' own "PATH: no such file"
MISSING_RX = re.compile(r"Invalid value for '([^']+)': (?:File|Path|Directory) '(.+)' does not exist\.")


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

    def resolve_command(self, ctx, args):
        """An unknown sub-command names the closest one (`roofline analyse` -> "Did you mean 'analyze'?")."""
        import difflib

        name = args[0] if args else None
        if name and not name.startswith("-") and name not in LAZY_COMMANDS:
            close = difflib.get_close_matches(name, list(LAZY_COMMANDS), n=1, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's main, with every error as ONE line on stderr: a usage error (exit 2) and, as the
        last net, an unexpected exception (exit 2, "internal error": a bug to report; set
        ROOFLINE_DEBUG=1 to see its traceback). Never a traceback on a user's terminal."""
        import os

        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `roofline` (or `roofline ladder`): the help
            click.echo(exc.ctx.get_help())
            sys.exit(0)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else (prog_name or "roofline")
            msg = " ".join(exc.format_message().split())
            missing = MISSING_RX.fullmatch(msg)
            if missing:     # click's "Path 'p' does not exist" in the one wording every command uses
                click.echo(f"{where}: {missing.group(2)}: no such file ({missing.group(1)})", err=True)
                sys.exit(2)
            hint = f" (see `{where} --help`)" if exc.ctx is not None else ""
            click.echo(f"{where}: {msg}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"{prog_name or 'roofline'}: {' '.join(exc.format_message().split())}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            sys.exit(1)
        except Exception as exc:  # noqa: BLE001 - the last net
            if os.environ.get("ROOFLINE_DEBUG"):
                raise
            msg = " ".join(f"{exc.__class__.__name__}: {exc}".split())[:400]
            click.echo(f"roofline: internal error: {msg} (a bug: please report it; ROOFLINE_DEBUG=1 shows "
                       "the traceback)", err=True)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)

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
