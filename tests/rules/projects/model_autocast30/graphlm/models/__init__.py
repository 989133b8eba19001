from graphlm.models.graph import GraphLM
from graphlm.models.text import TextLM

load_model = {
    "text": TextLM,
    "graph": GraphLM,
}
