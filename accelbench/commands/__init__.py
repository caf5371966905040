"""Thin click commands, one module per pipeline stage; ``accelbench.cli`` registers them all."""
