"""The demo: sliding strongly connected components of a mention stream, with their top tags, in
the browser."""
