"""roofline: headroom analysis of the Top-N kernels of an LLM-serving run.

Public API (imports are lazy so that `import roofline` stays cheap):

    roofline.analyze(topn, env=None, config=None, ...) -> dict   # the artifact
    roofline.hook.run(round_dir, ...)                             # the pipeline entry point
"""
from __future__ import annotations

__version__ = "0.1.0"


def _source_tree_finder() -> None:
    """In a source checkout used without installing it (PYTHONPATH=<repo>), find roofline.ladder and
    roofline.peaks in the top-level ladder/ and peaks/ folders, as the package-dir mapping of
    pyproject.toml does for an install. Installed (wheel: the folders sit inside the package;
    editable: setuptools maps them the same way) this changes nothing."""
    import sys
    from importlib.util import spec_from_file_location
    from pathlib import Path

    here = Path(__file__).resolve().parent
    src = {n: here.parent / n for n in ("ladder", "peaks")
           if (here.parent / n / "__init__.py").is_file() and not (here / n).exists()}
    if not src:
        return

    class _TopLevelFolders:  # a MetaPathFinder for exactly roofline.ladder and roofline.peaks
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            pkg, _, name = fullname.partition(".")
            if pkg != "roofline" or name not in src:
                return None
            return spec_from_file_location(fullname, src[name] / "__init__.py",
                                           submodule_search_locations=[str(src[name])])

    sys.meta_path.insert(0, _TopLevelFolders())


_source_tree_finder()


def analyze(*args, **kwargs):
    """See :func:`roofline.api.analyze`."""
    from roofline.api import analyze as _analyze

    return _analyze(*args, **kwargs)


def __getattr__(name):
    if name == "hook":
        import importlib

        return importlib.import_module("roofline.hook")
    raise AttributeError(name)
