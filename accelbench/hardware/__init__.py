"""accelbench.hardware stage."""
