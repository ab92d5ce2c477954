"""`nettop persist` and `nettop apply`: a tuning proven on one host, carried to the next boot and to a fleet."""
