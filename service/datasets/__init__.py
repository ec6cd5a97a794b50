"""Datasets: uploaded tables, stored column by column."""
