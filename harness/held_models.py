"""Models held on attributes of the analysed project's own plain objects (``gan.discriminator``),
found the way memlint names them; shared by the Keras oracle and the repository sweep, each
running its own Keras (Keras 3, or tf_keras for Keras 2 code)."""


def held_models(roots: dict, found: dict, local: set, model_class, layer_class,
                compiled) -> None:
    """Add to ``found`` (name -> model) the models on attributes of objects of the project's
    own classes (``local``: their modules), reached from ``roots`` (name -> value), as
    ``holder.attribute``: those compiled (``compiled``: ids) or not used as a layer of
    another model.  Layers and models are not searched (their parts are not models of
    their own)."""
    named = {id(model) for model in found.values()}
    seen = set()
    stack = [(name, value, 0) for name, value in reversed(list(roots.items()))]
    while stack:
        path, value, depth = stack.pop()
        if id(value) in seen or depth > 4 or isinstance(value, (layer_class, type)) \
                or type(value).__module__ not in local:
            continue
        seen.add(id(value))
        attrs = list(vars(value).items()) if hasattr(value, "__dict__") else []
        for attr, item in attrs:
            if isinstance(item, model_class):
                used_as_layer = bool(item._inbound_nodes)
                if id(item) not in named and (id(item) in compiled or not used_as_layer):
                    named.add(id(item))
                    found[f"{path}.{attr}"] = item
        stack.extend((f"{path}.{attr}", item, depth + 1) for attr, item in reversed(attrs))
