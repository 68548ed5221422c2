"""Start-up tuning, apart from any lint logic: the garbage collector kept out of a run's way
(collector), and what is kept on disk between runs so a run loads fast (kept_files:
libcst's dataclass code and the rules' parsed YAML)."""
