"""Renderers: turn file results into text for people or JSON for tools. No lint logic here."""
