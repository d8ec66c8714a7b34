def interpret(func, *arrays):
    raise NotImplementedError("TEMPORARY")
