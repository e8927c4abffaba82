-- effect_money: an effect's amount and currency as its tool's registration
-- says to read them from the call's input: the amount argument when it is
-- an integer that fits a bigint, the currency argument when it is a
-- three-letter upper-case code; NULL otherwise. The one rule: record_tool_call
-- writes by it and ledger_problems checks stored effects against it.
-- PL/pgSQL, as search_text: a SQL function read in FROM is planned again at
-- every execution of the statement that reads it (every effectful call).
CREATE OR REPLACE FUNCTION convo_private.effect_money(
    p_input        jsonb,
    p_amount_arg   text,
    p_currency_arg text,
    OUT amount_minor bigint,
    OUT currency     text)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    amount_minor := CASE WHEN jsonb_typeof(p_input -> p_amount_arg) = 'number'
                          AND (p_input ->> p_amount_arg)::numeric = trunc((p_input ->> p_amount_arg)::numeric)
                          AND abs((p_input ->> p_amount_arg)::numeric) < 9e18
                         THEN (p_input ->> p_amount_arg)::numeric::bigint END;
    currency := CASE WHEN p_input ->> p_currency_arg ~ '^[A-Z]{3}$' THEN p_input ->> p_currency_arg END;
END;
$$;
