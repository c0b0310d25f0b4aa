"""mpi_test: a program run on 2 ranks under mpirun by lib/dist/ddp_test.sh."""

def mpi_test(name, program, args = [], expect_fail = None, within = None):
    """One multi-rank test (size large, exclusive: the ranks share the cores).

    Args:
      name: the test's name.
      program: the label of the binary each rank runs.
      args: the program's arguments.
      expect_fail: a regular expression the output of a job that must fail
        matches (ddp_test.sh --expect-fail); None: the job must exit 0.
      within: seconds the failing job may take (ddp_test.sh --within).
    """
    opts = ["--ranks=2"]
    if expect_fail:
        opts.append("--expect-fail='%s'" % expect_fail)
    if within:
        opts.append("--within=%d" % within)
    native.sh_test(
        name = name,
        size = "large",
        srcs = ["ddp_test.sh"],
        args = opts + ["$(location %s)" % program] + args,
        data = [program],
        tags = ["exclusive"],
    )
