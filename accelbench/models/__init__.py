"""accelbench.models stage."""
