"""Composition root of the generation service: settings -> chat client -> answerer -> gRPC server."""

from __future__ import annotations

import logging

from ragmesh.v1 import generation_pb2_grpc
from ragmesh_common.clients.llm import ChatClient
from ragmesh_common.rpc.server import GrpcServer
from ragmesh_common.settings import describe

from ragmesh_generation.answerer import GroundedAnswerer
from ragmesh_generation.openai_chat import OpenAIChatModel
from ragmesh_generation.ports import ChatModel
from ragmesh_generation.servicer import GenerationServicer
from ragmesh_generation.settings import GenerationSettings

log = logging.getLogger("ragmesh.generation")


def chat_client(settings: GenerationSettings) -> ChatClient:
    # The HTTP timeout is only a backstop: the answerer enforces first-token, idle and deadline
    # limits itself and closes the stream when one is hit.
    timeout = max(settings.first_token_timeout_s, settings.idle_timeout_s) + 5
    return ChatClient(settings.llm_url, settings.llm_model, api_key=settings.llm_api_key, timeout=timeout)


def build_chat_model(settings: GenerationSettings, client: ChatClient | None = None) -> ChatModel:
    return OpenAIChatModel(client or chat_client(settings), base_url=settings.llm_url, api_key=settings.llm_api_key,
                           stop=settings.stop)


def build_server(settings: GenerationSettings, model: ChatModel | None = None) -> tuple[GrpcServer, ChatModel]:
    """The server with its servicer registered, not started. Tests pass their own model."""
    server = GrpcServer("generation", host=settings.host, port=settings.port,
                        metrics_port=settings.metrics_port or None)
    if model is None:
        client = chat_client(settings)
        model = build_chat_model(settings, client)
        server.watch_model("generation", client.is_serving)
    server.add(generation_pb2_grpc.add_GenerationServicer_to_server,
               GenerationServicer(GroundedAnswerer(model, settings)), "ragmesh.v1.Generation")
    return server, model


async def serve(settings: GenerationSettings) -> None:
    server, model = build_server(settings)
    shown = describe(settings)
    shown["llm_api_key"] = "***" if settings.llm_api_key else ""  # describe() masks by name; "key" is not one
    log.info("starting", extra={"fields": {"settings": shown}})
    await server.start()
    server.install_signal_handlers()
    await server.wait_and_stop(on_stop=[model.close])
