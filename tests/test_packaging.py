"""The installed package is complete: every source package is listed in setup.cfg."""
import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_installed():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = {"astjax"} | {
        "astjax." + ".".join(p.parent.relative_to(ROOT / "astjax").parts)
        for p in (ROOT / "astjax").rglob("__init__.py") if p.parent != ROOT / "astjax"
        and "templates" not in p.parts}
    assert found <= listed, f"missing from setup.cfg packages: {sorted(found - listed)}"
    assert "astjax.templates" in listed


def test_version_is_the_one_setup_cfg_installs():
    """``astjax --version`` prints ``astjax.__version__``: the same as the package's."""
    import astjax
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["version"] == astjax.__version__
