def lower(func, target=None):
    raise NotImplementedError("TEMPORARY")
