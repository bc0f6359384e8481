"""How the two clients get their methods: each operation is a plan declared once on their
common base, docparse.operations.BaseClient (`@answering def submit(self, ...)`), and becomes
a method on `docparse.client.Client` (a BlockingShell: it answers) and a coroutine on
`docparse.aio.AsyncClient` (an AsyncShell: it is awaited), with the operation's parameters,
docstring and types. So both clients have the same methods by construction.

A shell runs plans (docparse.effects): `_run(plan)` to the plan's answer, `_records(run)` for
the records an iterating operation (a watch) hands out.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from docparse.effects import Plan, Records, Run

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
G = TypeVar("G")  # the plan: a generator (docparse.effects)
S = TypeVar("S")  # what a method of a BlockingShell returns
A = TypeVar("A")  # what a method of an AsyncShell returns


class BlockingShell:
    def _run(self, plan: Plan[T]) -> T:
        raise NotImplementedError

    def _records(self, run: Run[Any]) -> Iterator[Any]:
        raise NotImplementedError


class AsyncShell:
    async def _run(self, plan: Plan[T]) -> T:
        raise NotImplementedError

    def _records(self, run: Run[Any]) -> AsyncIterator[Any]:
        raise NotImplementedError


class Operation(Generic[P, G, S, A]):
    """A descriptor: the operation as a method of the shell it is looked up on."""

    def __init__(self, plan: Callable[Concatenate[Any, P], G], iterates: bool) -> None:
        self.plan = plan
        self.iterates = iterates
        self.methods: dict[type, Callable[..., Any]] = {}

    @overload
    def __get__(self, shell: None, owner: type[BlockingShell]) -> Callable[
        Concatenate[BlockingShell, P], S]: ...  # fmt: skip
    @overload
    def __get__(self, shell: None, owner: type[AsyncShell]) -> Callable[
        Concatenate[AsyncShell, P], A]: ...  # fmt: skip
    @overload
    def __get__(self, shell: None, owner: type[Any]) -> Callable[Concatenate[Any, P], G]: ...
    @overload
    def __get__(self, shell: BlockingShell, owner: type[Any]) -> Callable[P, S]: ...
    @overload
    def __get__(self, shell: AsyncShell, owner: type[Any]) -> Callable[P, A]: ...
    def __get__(self, shell: Any, owner: type[Any]) -> Any:
        """On a shell, the shell's method; on the common base, the plan itself."""
        if not issubclass(owner, BlockingShell | AsyncShell):
            return self.plan
        if owner not in self.methods:
            self.methods[owner] = self._method(owner)
        method = self.methods[owner]
        return method if shell is None else types.MethodType(method, shell)

    def _method(self, owner: type[Any]) -> Callable[..., Any]:
        plan: Callable[..., Any] = self.plan
        is_async = issubclass(owner, AsyncShell)

        def records(shell: Any, /, *args: Any, **kwargs: Any) -> Any:
            return shell._records(Run(plan(shell, *args, **kwargs)))

        def answer(shell: Any, /, *args: Any, **kwargs: Any) -> Any:
            return shell._run(plan(shell, *args, **kwargs))

        async def awaited(shell: Any, /, *args: Any, **kwargs: Any) -> Any:
            return await shell._run(plan(shell, *args, **kwargs))

        method = records if self.iterates else awaited if is_async else answer
        returns = ("AsyncIterator[{}]" if is_async else "Iterator[{}]") if self.iterates else "{}"
        dress(method, plan, owner, returns)
        return method


def answering(
    plan: Callable[Concatenate[Any, P], Plan[T]],
) -> Operation[P, Plan[T], T, Coroutine[Any, Any, T]]:
    """An operation that answers a T: a method returning it, or a coroutine."""
    return Operation(plan, iterates=False)


def iterating(
    plan: Callable[Concatenate[Any, P], Records[R]],
) -> Operation[P, Records[R], Iterator[R], AsyncIterator[R]]:
    """An operation that hands out records: an iterator of them, or an async iterator (nothing
    is called before the first is asked for)."""
    return Operation(plan, iterates=True)


def dress(method: Any, plan: Callable[..., Any], owner: type[Any], returns: str) -> None:
    """Gives a shell's method the plan's name, docstring and signature, with `self` and the
    return annotation as the shell gives it (`returns`, e.g. "Iterator[{}]")."""
    signature = inspect.signature(plan)
    this, *rest = signature.parameters.values()
    declared = str(signature.return_annotation)
    match = re.fullmatch(r"(?:Plan|Records)\[(.*)\]", declared)
    method.__name__ = plan.__name__
    method.__qualname__ = f"{owner.__qualname__}.{plan.__name__}"
    method.__module__ = owner.__module__
    method.__doc__ = plan.__doc__
    method.__signature__ = signature.replace(
        parameters=[this.replace(name="self", annotation=inspect.Parameter.empty), *rest],
        return_annotation=returns.format(match.group(1) if match else declared),
    )
