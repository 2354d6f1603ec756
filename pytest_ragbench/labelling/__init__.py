"""``ragbench label``: which items to label next (active sampling), and a page to label them."""
