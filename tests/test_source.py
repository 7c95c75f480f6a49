"""Tests of astjax.frontend.source: finding, parsing and checking a function's source."""
from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gast
import numpy as np
import pytest

from astjax.errors import SourceError
from astjax.frontend import source
from astjax.frontend.source import (
    FunctionSource,
    clear_cache,
    get_function_source,
    unwrap_callable,
)

FIXTURES = Path(__file__).parent / "source_fixtures"
REPO = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str):
    """Import a file under a fixed module name (independent of tests/ being a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kinds():
    return _load(FIXTURES / "kinds.py", "astjax_test_source_kinds")


@pytest.fixture(scope="module")
def future_mod():
    return _load(FIXTURES / "future_annotations.py", "astjax_test_source_future")


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


def marker(mark: str) -> tuple[int, str]:
    """(line number, line text) of the fixture line ending in ``# @mark``."""
    lines = (FIXTURES / "kinds.py").read_text(encoding="utf-8").splitlines()
    hits = [i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# @{mark}")]
    assert len(hits) == 1, mark
    return hits[0], lines[hits[0] - 1]


def col(text: str, needle: str, nth: int = 0) -> int:
    """Character column of the ``nth`` occurrence of ``needle`` in ``text``."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return at


def indent(text: str) -> int:
    return len(text) - len(text.lstrip())


# --------------------------------------------------------------------------- functions


def test_module_function(kinds):
    src = get_function_source(kinds.module_fn)
    assert isinstance(src, FunctionSource)
    assert isinstance(src.node, gast.FunctionDef)
    assert src.node.name == src.name == "module_fn"
    assert src.qualname == "module_fn"
    assert src.filename == kinds.__file__
    assert src.globals is kinds.__dict__
    assert src.code is kinds.module_fn.__code__
    assert src.closure == {}
    assert src.defaults == {"y": 2.0, "z": 1.0}
    line, _ = marker("module_fn")
    assert (src.node.lineno, src.node.col_offset) == (line, 0)
    body_line, body_text = marker("module_fn.body")
    assert src.node.body[0].lineno == body_line
    assert src.node.body[0].col_offset == indent(body_text) == 4
    assert src.node.end_lineno == body_line + 1
    assert "def module_fn" in src.source_lines[line - 1]
    assert src.source_lines == linecache.getlines(kinds.__file__)


def test_nested_function_has_absolute_positions(kinds):
    fn = kinds.outer(2.0)
    src = get_function_source(fn)
    line, text = marker("inner")
    assert src.qualname == "outer.<locals>.inner"
    assert (src.node.lineno, src.node.col_offset) == (line, col(text, "def"))
    assert src.node.col_offset == 4
    body_line, body_text = marker("inner.body")
    ret = src.node.body[0]
    assert isinstance(ret, gast.Return)
    assert (ret.lineno, ret.col_offset) == (body_line, 8)
    assert ret.value.col_offset == col(body_text, "x * a")
    assert ret.value.end_col_offset == col(body_text, "b  #") + 1
    left = ret.value.left.left
    assert isinstance(left, gast.Name) and left.id == "x"
    assert (left.lineno, left.col_offset) == (body_line, col(body_text, "x * a"))
    assert src.closure["a"] == 2.0
    np.testing.assert_array_equal(src.closure["b"], np.ones(3))


def test_every_node_position_is_inside_the_function(kinds):
    src = get_function_source(kinds.outer(1.0))
    for node in gast.walk(src.node):
        if hasattr(node, "lineno") and node.lineno is not None:
            assert src.node.lineno <= node.lineno <= src.node.end_lineno
            text = src.source_lines[node.lineno - 1]
            assert 0 <= node.col_offset <= len(text)


def test_closures_are_read_per_function_object(kinds):
    bump = kinds.counter()
    assert get_function_source(bump).closure == {"n": 0}
    bump(5)
    assert get_function_source(bump).closure == {"n": 5}
    first, second = kinds.outer(1.0), kinds.outer(7.0)
    a, b = get_function_source(first), get_function_source(second)
    assert a.node is b.node  # same code object: parsed once
    assert (a.closure["a"], b.closure["a"]) == (1.0, 7.0)


def test_empty_closure_cells_are_omitted(kinds):
    fn = kinds.never_assigned()
    assert fn.__code__.co_freevars == ("late",)
    assert get_function_source(fn).closure == {}


def test_decorators_are_removed(kinds):
    src = get_function_source(kinds.decorated)
    line, _ = marker("decorated")
    assert kinds.decorated.__code__.co_firstlineno < line  # starts at the first decorator
    assert src.node.lineno == line  # ...but the node starts at the def
    assert src.node.decorator_list == []
    assert src.node.body[0].lineno == marker("decorated.body")[0]
    assert kinds.decorated.tag == "multi-line decorator"


def test_functools_wraps_wrapper_is_peeled(kinds):
    src = get_function_source(kinds.wrapped)
    assert src.name == "wrapped"
    assert src.node.lineno == marker("wrapped")[0]
    assert src.node.decorator_list == []
    assert src.code is kinds.wrapped.__wrapped__.__code__


def test_methods(kinds):
    line, text = marker("Model.predict")
    body_line, body_text = marker("Model.predict.body")
    model = kinds.Model(2.0)
    for fn in (kinds.Model.predict, model.predict):
        src = get_function_source(fn)
        assert src.qualname == "Model.predict"
        assert (src.node.lineno, src.node.col_offset) == (line, 4)
        assert (src.node.body[0].lineno, src.node.body[0].col_offset) == (body_line, 8)
        assert src.node.body[0].value.right.col_offset == col(body_text, "self.__hidden")
    static = get_function_source(kinds.Model.static)
    assert static.defaults == {"k": 4}
    assert get_function_source(kinds.Model.klass).qualname == "Model.klass"
    sup = get_function_source(kinds.Model.uses_super)
    assert sup.closure == {"__class__": kinds.Model}
    assert get_function_source(kinds.Model.nested_in_method).closure == {
        "__class__": kinds.Model
    }
    local_cls = kinds.make_model_class()
    local = get_function_source(local_cls.method)
    assert local.qualname == "make_model_class.<locals>.Local.method"
    assert local.closure == {"c": 2.0}
    assert local.node.col_offset == 8


def test_callable_instance_uses_its_call(kinds):
    src = get_function_source(kinds.Model(1.0))
    assert src.qualname == "Model.__call__"


def test_lambda_in_class_body_with_mangled_name(kinds):
    line, text = marker("Model.key")
    for fn in (kinds.Model.key, kinds.Model(1.0).key):
        src = get_function_source(fn)
        assert isinstance(src.node, gast.Lambda)
        assert (src.node.lineno, src.node.col_offset) == (line, col(text, "lambda"))
        assert src.qualname == "Model.<lambda>"


# --------------------------------------------------------------------------- lambdas


def test_two_lambdas_on_one_line(kinds):
    line, text = marker("two_lambdas")
    double = get_function_source(kinds.f_double)
    inc = get_function_source(kinds.f_inc)
    assert double.name == inc.name == "<lambda>"
    assert isinstance(double.node, gast.Lambda)
    assert double.node.lineno == inc.node.lineno == line
    assert double.node.col_offset == col(text, "lambda", 0)
    assert inc.node.col_offset == col(text, "lambda", 1)
    assert isinstance(double.node.body.op, gast.Mult)
    assert isinstance(inc.node.body.op, gast.Add)
    assert double.node.end_col_offset == col(text, ", lambda")


def test_identical_lambdas_on_one_line_are_told_apart_by_column(kinds):
    _, text = marker("same_lambdas")
    a = get_function_source(kinds.same_a)
    b = get_function_source(kinds.same_b)
    assert a.node.col_offset == col(text, "lambda", 0)
    assert b.node.col_offset == col(text, "lambda", 1)


def test_curried_lambdas(kinds):
    line, text = marker("curried")
    outer = get_function_source(kinds.curried)
    inner = get_function_source(kinds.curried(3))
    assert outer.node.col_offset == col(text, "lambda", 0)
    assert inner.node.col_offset == col(text, "lambda", 1)
    assert isinstance(outer.node.body, gast.Lambda)
    assert inner.closure == {"a": 3}
    assert inner.qualname == "<lambda>.<locals>.<lambda>"


def test_lambdas_nested_inside_calls(kinds):
    line, text = marker("nested_calls")
    neg, triple = kinds.nested_calls[1]
    a, b = get_function_source(neg), get_function_source(triple)
    assert (a.node.lineno, a.node.col_offset) == (line, col(text, "lambda v"))
    assert (b.node.lineno, b.node.col_offset) == (line, col(text, "lambda w"))
    assert [x.id for x in b.node.args.args] == ["w"]


def test_lambda_spread_over_several_lines(kinds):
    body_line, body_text = marker("spread.body")
    start_line, start_text = marker("spread")
    src = get_function_source(kinds.in_call_lambda.keywords["key"])
    key_line = start_line + 2
    assert src.node.lineno == key_line
    assert src.node.col_offset == col(src.source_lines[key_line - 1], "lambda")
    assert src.node.end_lineno == body_line + 1
    mult = src.node.body
    assert isinstance(mult, gast.BinOp) and isinstance(mult.op, gast.Mult)
    assert mult.right.lineno == body_line
    assert mult.right.col_offset == col(body_text, "2")


def test_lambda_whose_arguments_span_lines(kinds):
    line, text = marker("spread_args")
    src = get_function_source(kinds.spread_args[0])
    assert src.node.lineno == line - 1
    assert src.node.end_lineno == line
    assert src.node.body.col_offset == col(text, "a + b")


def test_second_lambda_of_a_multi_line_tuple(kinds):
    line, text = marker("second_of_pair")
    src = get_function_source(kinds.pair[1])
    assert (src.node.lineno, src.node.col_offset) == (line, col(text, "lambda"))
    first = get_function_source(kinds.pair[0])
    assert first.node.lineno == line - 1


def test_lambda_defaults_and_constant_lambda(kinds):
    star = get_function_source(kinds.star_lambda)
    assert star.defaults == {"k": 1}
    assert star.node.args.vararg.id == "rest"
    const = get_function_source(kinds.constant)
    assert isinstance(const.node.body, gast.Constant) and const.node.body.value == 0


def test_identical_lambdas_without_column_information_are_ambiguous():
    """Under ``-X no_debug_ranges`` columns are gone: different lambdas are still told
    apart by their code, identical ones on one line are refused."""
    script = textwrap.dedent(
        f"""
        import importlib.util, sys
        from astjax.errors import SourceError
        from astjax.frontend.source import get_function_source
        spec = importlib.util.spec_from_file_location("k", {str(FIXTURES / "kinds.py")!r})
        k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k)
        assert get_function_source(k.f_double).node.body.op.__class__.__name__ == "Mult"
        assert get_function_source(k.f_inc).node.body.op.__class__.__name__ == "Add"
        assert [a.id for a in get_function_source(k.curried(1)).node.args.args] == ["b"]
        try:
            get_function_source(k.same_a)
        except SourceError as e:
            print(e)
        else:
            print("no error")
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-X", "no_debug_ranges", "-c", script],
        capture_output=True, text=True, env=env, cwd=REPO, check=True,
    ).stdout
    line, text = marker("same_lambdas")
    assert "cannot tell which of 2 identical lambdas on line" in out
    assert f"kinds.py\", line {line}" in out
    assert "    " + text.strip() in out
    assert "hint: give the lambda a line of its own" in out


# --------------------------------------------------------------------------- other shapes


def test_generators_coroutines_and_many_constructs(kinds, future_mod):
    assert isinstance(get_function_source(kinds.gen).node, gast.FunctionDef)
    assert isinstance(get_function_source(kinds.coro).node, gast.AsyncFunctionDef)
    src = get_function_source(kinds.many_constructs)
    assert any(isinstance(n, gast.Match) for n in gast.walk(src.node))
    assert get_function_source(future_mod.annotated).name == "annotated"


def test_columns_count_characters_not_bytes(kinds):
    line, text = marker("unicode")
    assert not text.isascii()
    src = get_function_source(kinds.unicode_fn)
    ret = src.node.body[1]
    assert isinstance(ret, gast.Return)
    assert (ret.lineno, ret.col_offset) == (line, col(text, "return"))
    right = ret.value.right  # str(x)
    assert right.col_offset == col(text, "str(x)")
    assert right.end_col_offset == col(text, "str(x)") + len("str(x)")


def test_partial_is_peeled_by_get_function_source(kinds):
    src = get_function_source(functools.partial(kinds.module_fn, 1.0, z=3.0))
    assert src.name == "module_fn"


def test_copy_node_and_location(kinds):
    src = get_function_source(kinds.module_fn)
    copy = src.copy_node()
    assert copy is not src.node
    assert gast.dump(copy) == gast.dump(src.node)
    loc = src.location(src.node.body[0])
    assert (loc.filename, loc.lineno, loc.col) == (src.filename, src.node.body[0].lineno, 4)
    assert loc.function == "module_fn"


# --------------------------------------------------------------------------- no source


def _exec_function(code_text: str, filename: str):
    namespace: dict = {}
    exec(compile(code_text, filename, "exec"), namespace)
    return namespace["f"]


@pytest.mark.parametrize("filename", ["<string>", "<stdin>"])
def test_function_without_source(filename):
    fn = _exec_function("def f(x):\n    return x + 1\n", filename)
    with pytest.raises(SourceError) as info:
        get_function_source(fn)
    err = info.value
    assert "cannot find the source of 'f'" in err.message
    assert "interactive prompt or made by exec/eval" in err.message
    assert err.location.filename == filename and err.location.lineno == 1
    assert err.hint.startswith("astjax transforms Python functions defined in a file")
    assert f'File "{filename}", line 1, in f' in str(err)


def test_source_registered_in_linecache_is_found():
    """Notebooks (and generated code) register their text in linecache."""
    filename = "<astjax-test-cell-1>"
    text = "x0 = 1\n\ndef f(x):\n    return x * 2\n"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    try:
        src = get_function_source(_exec_function(text, filename))
        assert (src.node.lineno, src.node.body[0].lineno, src.node.body[0].col_offset) == (
            3, 4, 4)
        assert get_function_source(_exec_function(text, filename)).node is not None
    finally:
        linecache.cache.pop(filename, None)


@pytest.mark.parametrize(
    "obj, what",
    [
        (len, "the built-in function len"),
        (np.tanh, "the NumPy ufunc np.tanh"),
        ([].append, "the built-in function list.append"),
        (str.upper, "the built-in function str.upper"),
    ],
)
def test_builtins_and_ufuncs_are_refused(obj, what):
    for call in (unwrap_callable, get_function_source):
        with pytest.raises(SourceError) as info:
            call(obj)
        assert what in info.value.message
        assert "no Python source" in info.value.message
        assert info.value.hint.startswith("astjax transforms Python functions defined in a file")
        assert "hint: astjax transforms Python functions defined in a file" in str(info.value)


def test_numpy_python_functions_are_refused():
    with pytest.raises(SourceError) as info:
        unwrap_callable(np.sum)
    assert "NumPy's own code" in info.value.message
    assert "lambda x: np.sum(x)" in info.value.hint


def test_classes_and_plain_objects_are_refused(kinds):
    with pytest.raises(SourceError, match="the class .*Model: a class is not a function"):
        unwrap_callable(kinds.Model)
    with pytest.raises(SourceError, match="an object of type builtins.int .*not callable"):
        unwrap_callable(3)
    with pytest.raises(SourceError, match="built-in function len \\(found inside"):
        unwrap_callable(functools.partial(len, [1]))
    with pytest.raises(SourceError, match="classmethod object"):
        unwrap_callable(vars(kinds.Model)["klass"])


def test_wrapped_cycle_is_refused():
    def f():
        pass

    f.__wrapped__ = f
    with pytest.raises(SourceError, match="cycle"):
        unwrap_callable(f)


# --------------------------------------------------------------------------- unwrapping


def _plain(a, b, c=0, *, k=1):
    return (a, b, c, k)


def test_unwrap_plain_function():
    assert unwrap_callable(_plain) == (_plain, (), {})


def test_unwrap_partials_accumulate_in_call_order():
    class LoggedPartial(functools.partial):
        """A partial with its own __call__: Python does not flatten these."""

        def __call__(self, *args, **kwargs):
            return super().__call__(*args, **kwargs)

    inner = LoggedPartial(_plain, 1, k=10)
    outer = functools.partial(inner, 2, k=20)
    assert outer.func is inner  # really nested
    fn, args, kwargs = unwrap_callable(outer)
    assert (fn, args, kwargs) == (_plain, (1, 2), {"k": 20})
    assert fn(*args, 3, **kwargs) == outer(3) == (1, 2, 3, 20)
    assert fn(*args, **{**kwargs, "k": 5}) == outer(k=5)


def test_unwrap_bound_method_and_partial_of_it(kinds):
    model = kinds.Model(2.0)
    fn, args, kwargs = unwrap_callable(model.predict)
    assert fn is kinds.Model.predict and args == (model,) and kwargs == {}
    fn, args, kwargs = unwrap_callable(functools.partial(model.predict, 0.5))
    assert fn is kinds.Model.predict and args == (model, 0.5)
    assert fn(*args) == model.predict(0.5)
    fn, args, _ = unwrap_callable(kinds.Model.klass)
    assert fn is vars(kinds.Model)["klass"].__func__ and args == (kinds.Model,)
    fn, args, _ = unwrap_callable(vars(kinds.Model)["static"])
    assert fn is kinds.Model.static and args == ()


def test_unwrap_callable_instance(kinds):
    model = kinds.Model(1.0)
    fn, args, kwargs = unwrap_callable(model)
    assert fn is kinds.Model.__call__ and args == (model,)


def test_unwrap_follows_functools_wraps(kinds):
    fn, args, kwargs = unwrap_callable(functools.partial(kinds.wrapped, 3))
    assert fn is kinds.wrapped.__wrapped__ and args == (3,)
    cached = functools.lru_cache(_plain)
    assert unwrap_callable(cached) == (_plain, (), {})


# --------------------------------------------------------------------------- caching


def test_repeated_calls_hit_the_cache(kinds, monkeypatch):
    first = get_function_source(kinds.module_fn)

    def fail(fn):
        raise AssertionError("cache miss")

    monkeypatch.setattr(source, "_find", fail)
    again = get_function_source(kinds.module_fn)
    assert again.node is first.node
    assert again.source_lines is first.source_lines
    monkeypatch.undo()
    clear_cache()
    assert get_function_source(kinds.module_fn).node is not first.node


# --------------------------------------------------------------------------- edited files


MODULE_TEXT = '''\
import numpy as np


def f(x):
    y = np.sin(x)
    return y + 1


def g(x):
    return x * 2
'''


@pytest.fixture
def on_disk(tmp_path, monkeypatch):
    """Write MODULE_TEXT to a file and import it (no .pyc, so reloads read the file)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = tmp_path / "edited_mod.py"
    path.write_text(MODULE_TEXT)
    name = f"astjax_test_edited_{id(tmp_path)}"
    module = _load(path, name)
    yield path, module
    sys.modules.pop(name, None)
    linecache.checkcache(str(path))


def _edit(path: Path, text: str) -> None:
    """Rewrite the file and make sure its mtime moves (coarse file-system clocks)."""
    st = path.stat()
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_source_edited_in_place_is_refused(on_disk):
    path, module = on_disk
    _edit(path, MODULE_TEXT.replace("return y + 1", "return y + 2"))
    linecache.checkcache(str(path))
    with pytest.raises(SourceError) as info:
        get_function_source(module.f)
    err = info.value
    assert "the source of 'f' has changed since it was imported" in err.message
    assert err.location.filename == str(path)
    assert err.location.lineno == 4
    assert "reload" in err.hint
    text = str(err)
    assert f'File "{path}", line 4, in f' in text
    assert "\n    def f(x):\n    ^\n" in text
    assert text.endswith("hint: " + err.hint)


def test_edit_after_a_cached_lookup_is_still_seen(on_disk):
    path, module = on_disk
    assert get_function_source(module.g).node.body[0].lineno == 10
    _edit(path, MODULE_TEXT.replace("x * 2", "x * 3"))  # no checkcache: astjax stats
    with pytest.raises(SourceError, match="changed since it was imported"):
        get_function_source(module.g)


def test_lines_inserted_above_are_refused(on_disk):
    path, module = on_disk
    _edit(path, "# a new first line\n" + MODULE_TEXT)
    with pytest.raises(SourceError) as info:
        get_function_source(module.g)
    assert "no longer defines it at line 9" in info.value.message
    assert "importlib.reload" in info.value.hint


def test_edit_elsewhere_in_the_file_is_accepted(on_disk):
    path, module = on_disk
    _edit(path, MODULE_TEXT.replace("x * 2", "x * 2 + 0") + "\n\ndef h():\n    pass\n")
    assert get_function_source(module.f).node.body[1].lineno == 6
    with pytest.raises(SourceError):
        get_function_source(module.g)


def test_reload_after_edit_works_again(on_disk):
    path, module = on_disk
    _edit(path, MODULE_TEXT.replace("return y + 1", "return y - 1"))
    with pytest.raises(SourceError):
        get_function_source(module.f)
    module = _load(path, module.__name__)
    src = get_function_source(module.f)
    assert isinstance(src.node.body[1].value.op, gast.Sub)


def test_deleted_file_is_refused(on_disk):
    path, module = on_disk
    path.unlink()
    linecache.checkcache(str(path))
    with pytest.raises(SourceError) as info:
        get_function_source(module.f)
    assert "cannot be read" in info.value.message
    assert str(path) in info.value.message


def test_file_that_no_longer_parses_is_refused(on_disk):
    path, module = on_disk
    _edit(path, MODULE_TEXT.replace("def g(x):", "def g(x)"))
    with pytest.raises(SourceError) as info:
        get_function_source(module.f)
    assert "cannot parse edited_mod.py" in info.value.message
    assert info.value.location.lineno == 9
    assert "reload" in info.value.hint
