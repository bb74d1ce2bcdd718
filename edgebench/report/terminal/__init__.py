"""Terminal renderers (rich), one module per command family. Pure: documents in, renderables out.

Every renderer accepts a typed ``Document`` (or a stored/JSON dict, read through
``Document.from_dict``), uses ``edgebench.core.formats`` for one unit system across terminal, Markdown
and HTML, and escapes user strings (model names, errors, device names) as rich markup.
"""
