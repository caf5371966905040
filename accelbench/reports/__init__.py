"""accelbench.reports stage."""
