"""Rule templates: short Python functions whose bodies transformations inline.

Installed as the package ``astjax.templates``.  Each module holds one kind of rule
(``vjp`` for reverse mode); a function's name is the primitive's registry name.
"""
