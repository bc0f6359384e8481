"""scripts/check_structure.py, which `make lint` runs: it fails on an import circle (imports
inside functions, under TYPE_CHECKING and `from pkg import module` included), on a file over
400 lines and on a function over 60, in Python and in the TypeScript SDK's sources; and the
repository passes it."""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
TS_MODULES = ROOT / "clients" / "typescript" / "node_modules"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_structure", ROOT / "scripts" / "check_structure.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load()


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def run(root: Path, capsys: pytest.CaptureFixture[str], *packages: str) -> tuple[int, str]:
    code = check.main(["--root", str(root), "--packages", *(packages or ("pkg",))])
    return code, capsys.readouterr().out


def test_a_circle_closed_inside_a_function_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import helper\n",
        "pkg/b.py": "def helper():\n    from pkg import a\n    return a\n",
    })  # fmt: skip
    code, out = run(tmp_path, capsys)
    assert code == 1
    assert "import circle: pkg.a (l.1) -> pkg.b (l.2) -> pkg.a" in out


def test_a_relative_module_import_and_a_type_only_import_close_a_circle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "from .. import d\n",
        "pkg/d.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from pkg.sub.c import Thing\n"
        ),
    })  # fmt: skip
    code, out = run(tmp_path, capsys)
    assert code == 1
    assert "import circle: pkg.d (l.3) -> pkg.sub.c (l.1) -> pkg.d" in out


def test_a_circle_across_packages_is_found_and_a_chain_is_not_a_circle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, {
        "one/__init__.py": "from one.x import X\n",
        "one/x.py": "import two.y\nX = 1\n",
        "two/__init__.py": "",
        "two/y.py": "import one\n",
    })  # fmt: skip
    code, out = run(tmp_path, capsys, "one", "two")
    assert code == 1
    assert "import circle: one (l.1) -> one.x (l.1) -> two.y (l.1) -> one" in out
    (tmp_path / "two" / "y.py").write_text("import math\n")
    assert run(tmp_path, capsys, "one", "two")[0] == 0


def test_a_file_over_400_lines_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/long.py": "x = 1\n" * 400})
    assert run(tmp_path, capsys)[0] == 0
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 401)
    code, out = run(tmp_path, capsys)
    assert code == 1
    assert "pkg/long.py: 401 lines (limit 400)" in out


def test_a_function_over_60_lines_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def function(lines: int) -> str:  # the def line and a body: `lines` lines in all
        return "async def work():\n" + "    x = 1\n" * (lines - 1)

    write(tmp_path, {"pkg/__init__.py": "", "pkg/f.py": "\n\n" + function(60)})
    assert run(tmp_path, capsys)[0] == 0
    (tmp_path / "pkg" / "f.py").write_text("class A:\n    " + function(61).replace("\n", "\n    "))
    code, out = run(tmp_path, capsys)
    assert code == 1
    assert "pkg/f.py:2: function work is 61 lines (limit 60)" in out


def _typescript_tree(root: Path) -> Path:
    sdk = root / "clients" / "typescript"
    (sdk / "src" / "gen").mkdir(parents=True)
    (sdk / "node_modules").symlink_to(TS_MODULES)
    return sdk / "src"


@pytest.mark.skipif(
    shutil.which("node") is None or not (TS_MODULES / "typescript").is_dir(),
    reason="node and clients/typescript/node_modules (make ts-sdk) are needed",
)
def test_typescript_files_and_functions_over_the_limits_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, {"pkg/__init__.py": ""})
    src = _typescript_tree(tmp_path)
    body = "  const x = 1;\n"
    (src / "ok.ts").write_text(f"export function fine(): void {{\n{body * 58}}}\n")
    (src / "gen" / "huge.ts").write_text("export const x = 1;\n" * 500)  # generated: skipped
    assert run(tmp_path, capsys)[0] == 0
    (src / "long.ts").write_text(
        "export class C {\n"
        f"  method(): void {{\n{body * 59}  }}\n"
        f"  arrow = (): void => {{\n{body * 59}  }};\n"
        "}\n" + "// filler\n" * 280
    )
    code, out = run(tmp_path, capsys)
    assert code == 1
    assert "clients/typescript/src/long.ts: 404 lines (limit 400)" in out
    assert "clients/typescript/src/long.ts:2: function method is 61 lines (limit 60)" in out
    assert "clients/typescript/src/long.ts:63: function arrow is 61 lines (limit 60)" in out
    assert "gen/huge.ts" not in out and "ok.ts" not in out


def test_without_the_typescript_package_ci_fails_and_elsewhere_it_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "clients/typescript/src/a.ts": "export {};\n"})
    monkeypatch.setenv("CI", "true")
    code, out = run(tmp_path, capsys)
    assert code == 1
    assert "TypeScript limits not checked" in out
    monkeypatch.delenv("CI")
    code = check.main(["--root", str(tmp_path), "--packages", "pkg"])
    captured = capsys.readouterr()
    assert code == 0
    assert "TypeScript limits not checked" in captured.err


def test_the_repository_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code = check.main([])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "no circle, every file and function in limits" in out
