"""Building: what turns a plan's sources into artifacts, and what explains a failed build."""
