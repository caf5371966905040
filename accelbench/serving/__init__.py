"""accelbench.serving stage."""
