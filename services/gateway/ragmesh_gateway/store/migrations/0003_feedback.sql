-- Answer feedback: thumbs up (1) or down (-1) on one response, named by its request id.
CREATE TABLE feedback (
    feedback_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id  text NOT NULL CHECK (length(request_id) BETWEEN 1 AND 128),
    rating      smallint NOT NULL CHECK (rating IN (-1, 1)),
    comment     text CHECK (comment IS NULL OR length(comment) <= 2000),
    client_id   text CHECK (client_id IS NULL OR length(client_id) <= 128),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX feedback_request_id_idx ON feedback (request_id);
CREATE INDEX feedback_created_at_idx ON feedback (created_at);
