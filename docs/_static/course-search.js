// The search page's snippets come from a page's main part, which in this theme begins with its
// header buttons (launch, full screen, colour mode, search), a table of contents for printing
// ("Contents") and the language switch, and ends with the page's own contents list: leave those
// out, so that a snippet shows the page's own words, also where no search term is found in them.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return; // not the search page
  const menus = [
    ".bd-header-article",
    ".onlyprint",
    ".language-switch",
    ".bd-sidebar-secondary",
    ".prev-next-area",
    ".bd-footer-article",
  ];
  const pageText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(menus.join(",")).forEach((element) => element.remove());
    return pageText(page.documentElement.outerHTML, anchor);
  };
});
