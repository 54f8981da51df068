"""gem's hooks backed by a model behind any OpenAI-compatible chat-completions endpoint
(OpenAI, ollama, vLLM, the llama.cpp server, LM Studio):

    extractor = gem.llm.Extractor("llama3.1", "http://127.0.0.1:11434/v1")
    with gem.open("agent.db", extractor=extractor) as mem:
        mem.ingest(gem.Episode("My dog is called Rex."))

`Extractor`, `Reviser`, `Resolver` (the default tiers first, the model only when they are
unsure) and `Summarizer`; `LLMError` when the endpoint cannot answer. See hooks.py and
client.py.
"""
from .client import Client, LLMError
from .hooks import Extractor, Resolver, Reviser, Summarizer

__all__ = ["Extractor", "Reviser", "Resolver", "Summarizer", "Client", "LLMError"]
