/** An error answered to the client as GitHub would: status plus a JSON body with `message`. */
export class HttpError extends Error {
  readonly status: number;
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;
  constructor(
    status: number,
    message: string,
    extra: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = status;
    this.extra = extra;
    this.headers = headers;
  }
}

export const notFound = (): HttpError =>
  new HttpError(404, "Not Found", { documentation_url: "https://docs.github.com/rest" });

export const validationFailed = (
  errors: Array<Record<string, unknown>>,
  message = "Validation Failed",
): HttpError => new HttpError(422, message, { errors, documentation_url: "https://docs.github.com/rest" });
