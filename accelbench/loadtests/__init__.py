"""accelbench.loadtests stage."""
