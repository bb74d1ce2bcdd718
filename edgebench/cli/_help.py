"""``--help`` without typer's type placeholders.

Typer >= 0.2x prints a flag as ``--wide <bool>`` (a flag takes no value), an argument as
``{src}`` in the usage line and ``<list[str]>`` beside it -- Python types where a user wants the
thing to type. A repeatable option shows its item type and ``...`` (``--input-shape <str>...``). :func:`plain_placeholders` makes them read as click always did: no placeholder for a
flag, ``SRC...`` for an argument (``[SRC]`` when optional). Guarded: a typer without these hooks
(the older releases ``typer>=0.12`` allows already print it so) is left alone.
"""

from __future__ import annotations

from typing import Any


def plain_placeholders() -> None:
    try:
        from typer.core import TyperArgument, TyperOption
    except ImportError:   # pragma: no cover - typer without the rich help classes
        return
    if getattr(TyperArgument, "_edgebench_plain", False):
        return

    def arg_name(self: Any) -> str:
        return str(self.metavar or (self.name or "").upper())

    if hasattr(TyperArgument, "_usage_display_name"):
        def usage(self: Any) -> str:
            name = arg_name(self) if self.required else f"[{arg_name(self)}]"
            return name + ("..." if self.nargs != 1 else "")

        TyperArgument._usage_display_name = usage
    if isinstance(getattr(TyperArgument, "display_name_raw", None), property):
        TyperArgument.display_name_raw = property(arg_name)      # the panel's name column, error hints
    if hasattr(TyperArgument, "display_type_rich"):
        TyperArgument.display_type_rich = lambda self, ctx: None      # the name says what to give
    if hasattr(TyperOption, "display_type_rich"):
        typed = TyperOption.display_type_rich

        def option_type(self: Any, ctx: Any) -> str | None:
            if getattr(self, "is_flag", False):
                return None
            shown = typed(self, ctx)
            if isinstance(shown, str) and shown.startswith("<list[") and shown.endswith("]>"):
                return f"<{shown[6:-2]}>..."           # a repeatable option: one value per use
            return shown

        TyperOption.display_type_rich = option_type
    TyperArgument._edgebench_plain = True
