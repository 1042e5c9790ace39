"""Graph algorithms written with ddflow's public operators (iterate, join, reduce)."""
