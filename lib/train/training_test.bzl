"""training_test: a lib/train test that trains a model on the CPU backend."""

def training_test(name, src, args = [], manual = False, deps = []):
    """A large, exclusive cc_test (it trains; the cores are its own).

    Args:
      name: the test's name.
      src: its one .c file (its main is tb_test_main_cpu, lib/nn/nn_testing.h).
      args: the test's arguments (--full: the run by hand).
      manual: left out of //... (minutes on 2 cores: run by hand).
      deps: what it needs beside the trainer and the test main.
    """
    native.cc_test(
        name = name,
        size = "large",
        srcs = [src],
        args = args,
        linkopts = ["-lm"],
        tags = ["exclusive", "manual"] if manual else ["exclusive"],
        deps = [
            "//lib/backend:backend",
            "//lib/nn:testing",
            ":train",
        ] + deps,
    )
