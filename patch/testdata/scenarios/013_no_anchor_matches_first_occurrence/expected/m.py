def a():
    return 2

def b():
    return 1
