"""The `local` backend: packaged GGUF models served by llama.cpp on this machine, and the recorded replies of the
local model that the demo replays with no server."""
