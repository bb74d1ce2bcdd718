"""Pure renderers: results in, text or rich renderables out. Nothing here prints."""
